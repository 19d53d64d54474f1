#include "engine/onnx/tensor_proto.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/base/status.h"
#include "engine/onnx/onnx/onnx.pb.h"

namespace kiln {
namespace {

using onnx::TensorProto;

// Reads `length` bytes at `offset` of an external data file (length < 0: to
// the end of the file).
absl::StatusOr<std::string> ReadExternal(const std::string& path, int64_t offset,
                                         int64_t length) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open external data file '", path, "'"));
  f.seekg(0, std::ios::end);
  int64_t size = static_cast<int64_t>(f.tellg());
  if (offset < 0 || offset > size)
    return absl::InvalidArgumentError(absl::StrCat("external data offset ", offset,
                                                   " is outside '", path, "' (", size, " bytes)"));
  if (length < 0) length = size - offset;
  if (offset + length > size)
    return absl::InvalidArgumentError(absl::StrCat("external data [", offset, ", ",
                                                   offset + length, ") is outside '", path,
                                                   "' (", size, " bytes)"));
  std::string out(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  if (length > 0 && !f.read(out.data(), length))
    return absl::DataLossError(absl::StrCat("short read from '", path, "'"));
  return out;
}

absl::StatusOr<std::string> ExternalBytes(const TensorProto& p, const std::string& base_dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      if (!absl::SimpleAtoi(kv.value(), &offset))
        return absl::InvalidArgumentError(absl::StrCat("bad external data offset '", kv.value(), "'"));
    } else if (kv.key() == "length") {
      if (!absl::SimpleAtoi(kv.value(), &length))
        return absl::InvalidArgumentError(absl::StrCat("bad external data length '", kv.value(), "'"));
    }
  }
  if (location.empty()) return absl::InvalidArgumentError("external data without a location");
  if (location[0] == '/')
    return absl::InvalidArgumentError(
        absl::StrCat("external data location '", location, "' must be relative to the model"));
  for (absl::string_view part : absl::StrSplit(location, '/'))
    if (part == "..")
      return absl::InvalidArgumentError(
          absl::StrCat("external data location '", location, "' leaves the model directory"));
  std::string path = base_dir.empty() ? location : absl::StrCat(base_dir, "/", location);
  return ReadExternal(path, offset, length);
}

// Fills `h` (already shaped) from a typed repeated field.
template <typename Field, typename Fn>
absl::Status FillFrom(const Field& field, HostTensor* h, const char* field_name, Fn set) {
  if (field.size() != h->numel())
    return absl::InvalidArgumentError(absl::StrCat(field_name, " has ", field.size(),
                                                   " values, the shape needs ", h->numel()));
  for (int64_t i = 0; i < h->numel(); ++i) set(i, field.Get(static_cast<int>(i)));
  return absl::OkStatus();
}

}  // namespace

std::optional<DType> DTypeFromOnnx(int t) {
  switch (t) {
    case TensorProto::FLOAT: return dtypes::kFloat32;
    case TensorProto::UINT8: return dtypes::kUInt8;
    case TensorProto::INT8: return dtypes::kInt8;
    case TensorProto::UINT16: return dtypes::kUInt16;
    case TensorProto::INT16: return dtypes::kInt16;
    case TensorProto::INT32: return dtypes::kInt32;
    case TensorProto::INT64: return dtypes::kInt64;
    case TensorProto::BOOL: return dtypes::kBool;
    case TensorProto::FLOAT16: return dtypes::kFloat16;
    case TensorProto::DOUBLE: return dtypes::kFloat64;
    case TensorProto::UINT32: return dtypes::kUInt32;
    case TensorProto::UINT64: return dtypes::kUInt64;
    case TensorProto::BFLOAT16: return dtypes::kBFloat16;
    default: return std::nullopt;
  }
}

int OnnxTypeOf(DType t) {
  switch (t.scalar) {
    case ScalarType::kFloat32: return TensorProto::FLOAT;
    case ScalarType::kUInt8: return TensorProto::UINT8;
    case ScalarType::kInt8: return TensorProto::INT8;
    case ScalarType::kUInt16: return TensorProto::UINT16;
    case ScalarType::kInt16: return TensorProto::INT16;
    case ScalarType::kInt32: return TensorProto::INT32;
    case ScalarType::kInt64: return TensorProto::INT64;
    case ScalarType::kBool: return TensorProto::BOOL;
    case ScalarType::kFloat16: return TensorProto::FLOAT16;
    case ScalarType::kFloat64: return TensorProto::DOUBLE;
    case ScalarType::kUInt32: return TensorProto::UINT32;
    case ScalarType::kUInt64: return TensorProto::UINT64;
    case ScalarType::kBFloat16: return TensorProto::BFLOAT16;
    default: return TensorProto::UNDEFINED;
  }
}

std::string OnnxTypeName(int t) {
  if (TensorProto::DataType_IsValid(t))
    return TensorProto::DataType_Name(static_cast<TensorProto::DataType>(t));
  return absl::StrCat("type ", t);
}

absl::StatusOr<HostTensor> HostTensorFromProto(const TensorProto& p, const std::string& base_dir) {
  std::string what = p.name().empty() ? "tensor" : absl::StrCat("tensor '", p.name(), "'");
  std::optional<DType> dt = DTypeFromOnnx(p.data_type());
  if (!dt)
    return absl::UnimplementedError(absl::StrCat(what, ": element type ",
                                                 OnnxTypeName(p.data_type()),
                                                 " is not supported"));
  if (p.has_segment())
    return absl::UnimplementedError(absl::StrCat(what, ": segmented tensors are not supported"));
  Shape shape(p.dims().begin(), p.dims().end());
  auto fail = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  };
  // The element count, checked before anything is allocated.
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) return fail(absl::InvalidArgumentError("negative dimension"));
    if (d != 0 && numel > (int64_t{1} << 40) / d)
      return fail(absl::InvalidArgumentError("the tensor is too large"));
    numel *= d;
  }
  const size_t nbytes = static_cast<size_t>(numel) * dt->ItemSize();

  if (p.data_location() == TensorProto::EXTERNAL) {
    auto bytes = ExternalBytes(p, base_dir);
    if (!bytes.ok()) return fail(bytes.status());
    if (bytes->size() != nbytes)
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "external data has ", bytes->size(), " bytes, the shape needs ", nbytes)));
    HostTensor h(*dt, shape);
    if (nbytes) std::memcpy(h.data.data(), bytes->data(), nbytes);
    return h;
  }
  if (p.has_raw_data()) {
    if (p.raw_data().size() != nbytes)
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "raw_data has ", p.raw_data().size(), " bytes, the shape needs ", nbytes)));
    HostTensor h(*dt, shape);
    if (nbytes) std::memcpy(h.data.data(), p.raw_data().data(), nbytes);
    return h;
  }
  // Typed fields: the count must match before the tensor is allocated.
  const char* field = "int32_data";
  int count = p.int32_data_size();
  switch (p.data_type()) {
    case TensorProto::FLOAT: field = "float_data", count = p.float_data_size(); break;
    case TensorProto::DOUBLE: field = "double_data", count = p.double_data_size(); break;
    case TensorProto::INT64: field = "int64_data", count = p.int64_data_size(); break;
    case TensorProto::UINT32:
    case TensorProto::UINT64: field = "uint64_data", count = p.uint64_data_size(); break;
    default: break;
  }
  if (count != numel)
    return fail(absl::InvalidArgumentError(
        absl::StrCat(field, " has ", count, " values, the shape needs ", numel)));
  HostTensor h(*dt, shape);
  absl::Status s;
  switch (p.data_type()) {
    case TensorProto::FLOAT:
      s = FillFrom(p.float_data(), &h, "float_data", [&](int64_t i, float v) { h.SetDouble(i, v); });
      break;
    case TensorProto::DOUBLE:
      s = FillFrom(p.double_data(), &h, "double_data",
                   [&](int64_t i, double v) { h.SetDouble(i, v); });
      break;
    case TensorProto::INT64:
      s = FillFrom(p.int64_data(), &h, "int64_data",
                   [&](int64_t i, int64_t v) { h.SetInt(i, v); });
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      s = FillFrom(p.uint64_data(), &h, "uint64_data",
                   [&](int64_t i, uint64_t v) { h.SetInt(i, static_cast<int64_t>(v)); });
      break;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      // int32_data holds the 16-bit patterns.
      s = FillFrom(p.int32_data(), &h, "int32_data", [&](int64_t i, int32_t v) {
        uint16_t bits = static_cast<uint16_t>(v);
        std::memcpy(h.data.data() + 2 * i, &bits, 2);
      });
      break;
    default:  // int8/16/32, uint8/16, bool
      s = FillFrom(p.int32_data(), &h, "int32_data",
                   [&](int64_t i, int32_t v) { h.SetInt(i, v); });
      break;
  }
  if (!s.ok()) return fail(s);
  return h;
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  return ss.str();
}

absl::StatusOr<HostTensor> ReadTensorProtoFile(const std::string& path, std::string* name) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  TensorProto p;
  if (!p.ParseFromString(bytes))
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a TensorProto"));
  if (name) *name = p.name();
  std::string dir;
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) dir = path.substr(0, slash);
  auto h = HostTensorFromProto(p, dir);
  if (!h.ok())
    return absl::Status(h.status().code(), absl::StrCat(path, ": ", h.status().message()));
  return h;
}

void HostTensorToProto(const HostTensor& t, const std::string& name, TensorProto* p) {
  p->Clear();
  p->set_name(name);
  p->set_data_type(OnnxTypeOf(t.dtype));
  for (int64_t d : t.shape) p->add_dims(d);
  p->set_raw_data(std::string(t.data.begin(), t.data.end()));
}

}  // namespace kiln
