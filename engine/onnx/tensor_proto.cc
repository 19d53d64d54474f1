#include "engine/onnx/tensor_proto.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/base/status.h"
#include "engine/onnx/onnx/onnx.pb.h"

namespace kiln {
namespace {

using onnx::TensorProto;

// An open file descriptor, closed on destruction.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens `path` for reading without blocking (a FIFO without a writer would
// block a plain open) and checks that it is a regular file; `*size` gets
// its size.
absl::StatusOr<int> OpenRegular(const std::string& path, const char* what, int64_t* size) {
  if (path.find('\0') != std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat(what, " path contains a NUL byte"));
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return absl::NotFoundError(
        absl::StrCat("cannot open ", what, " '", path, "': ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "' is not a regular file"));
  }
  // Regular files never block; reads go through the normal path.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  *size = static_cast<int64_t>(st.st_size);
  return fd;
}

// Reads exactly `length` bytes at `offset` of `fd`.
absl::Status ReadAt(int fd, int64_t offset, int64_t length, char* out, const std::string& path) {
  int64_t done = 0;
  while (done < length) {
    size_t chunk = static_cast<size_t>(std::min<int64_t>(length - done, int64_t{1} << 30));
    ssize_t r = ::pread(fd, out + done, chunk, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return absl::DataLossError(absl::StrCat("short read from '", path, "' (", done, " of ",
                                              length, " bytes)"));
    done += r;
  }
  return absl::OkStatus();
}

// Physical memory of this machine (bytes); a single tensor larger than this
// can never be held.
int64_t PhysicalMemory() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<int64_t>::max();
  if (pages > std::numeric_limits<int64_t>::max() / page) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(pages) * page;
}

// Reads `length` bytes at `offset` of an external data file (length < 0: to
// the end of the file); the range must hold exactly `want` bytes.
absl::StatusOr<std::unique_ptr<char[]>> ReadExternal(const std::string& path, int64_t offset,
                                                     int64_t length,
                                         int64_t want) {
  int64_t size = 0;
  ASSIGN_OR_RETURN(int fd_num, OpenRegular(path, "external data file", &size));
  Fd fd(fd_num);
  if (offset < 0 || offset > size)
    return absl::InvalidArgumentError(absl::StrCat("external data offset ", offset,
                                                   " is outside '", path, "' (", size, " bytes)"));
  if (length < 0) length = size - offset;
  if (length > size - offset)  // no overflow: both sides are in [0, size]
    return absl::InvalidArgumentError(absl::StrCat("external data of ", length,
                                                   " bytes at offset ", offset, " is outside '",
                                                   path, "' (", size, " bytes)"));
  if (length != want)
    return absl::InvalidArgumentError(absl::StrCat("external data has ", length,
                                                   " bytes, the shape needs ", want));
  // Not zero-filled first: the read overwrites every byte or fails.
  std::unique_ptr<char[]> out(new char[static_cast<size_t>(length)]);
  RETURN_IF_ERROR(ReadAt(fd.get(), offset, length, out.get(), path));
  return out;
}

absl::StatusOr<std::unique_ptr<char[]>> ExternalBytes(const TensorProto& p,
                                                      const std::string& base_dir,
                                          int64_t want) {
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
  return ReadExternal(path, offset, length, want);
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

namespace {

// "tensor 'name': message" (or "tensor: ...").
absl::Status Described(const TensorProto& p, const absl::Status& s) {
  std::string what = p.name().empty() ? "tensor" : absl::StrCat("tensor '", p.name(), "'");
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

struct CheckedTensor {
  DType dtype;
  Shape shape;
  int64_t numel = 0;
  size_t nbytes = 0;
};

// The element type and shape of `p`, checked before anything is allocated.
absl::StatusOr<CheckedTensor> CheckTensor(const TensorProto& p) {
  std::optional<DType> dt = DTypeFromOnnx(p.data_type());
  if (!dt)
    return absl::UnimplementedError(
        absl::StrCat("element type ", OnnxTypeName(p.data_type()), " is not supported"));
  if (p.has_segment()) return absl::UnimplementedError("segmented tensors are not supported");
  CheckedTensor c{*dt, Shape(p.dims().begin(), p.dims().end())};
  ASSIGN_OR_RETURN(c.numel, CheckedNumel(c.shape, int64_t{1} << 40, "the tensor"));
  c.nbytes = static_cast<size_t>(c.numel) * dt->ItemSize();
  // Checked before anything is read or allocated (external data can name a
  // huge sparse file).
  if (static_cast<int64_t>(c.nbytes) > PhysicalMemory())
    return absl::ResourceExhaustedError(
        absl::StrCat("the tensor needs ", c.nbytes, " bytes, more than this machine's memory (",
                     PhysicalMemory(), " bytes)"));
  return c;
}

absl::StatusOr<std::optional<TensorBytes>> TensorBytesUndescribed(const TensorProto& p,
                                                                  const std::string& base_dir) {
  ASSIGN_OR_RETURN(CheckedTensor c, CheckTensor(p));
  TensorBytes out{c.dtype, std::move(c.shape)};
  if (p.data_location() == TensorProto::EXTERNAL) {
    ASSIGN_OR_RETURN(out.owned, ExternalBytes(p, base_dir, static_cast<int64_t>(c.nbytes)));
    out.bytes = absl::string_view(out.owned.get(), c.nbytes);
    return out;
  }
  if (!p.has_raw_data()) return std::nullopt;
  if (p.raw_data().size() != c.nbytes)
    return absl::InvalidArgumentError(absl::StrCat("raw_data has ", p.raw_data().size(),
                                                   " bytes, the shape needs ", c.nbytes));
  out.bytes = p.raw_data();
  return out;
}

}  // namespace

absl::StatusOr<std::optional<TensorBytes>> TensorBytesFromProto(const TensorProto& p,
                                                                const std::string& base_dir) {
  absl::StatusOr<std::optional<TensorBytes>> b = TensorBytesUndescribed(p, base_dir);
  if (!b.ok()) return Described(p, b.status());
  return b;
}

absl::StatusOr<HostTensor> HostTensorFromProto(const TensorProto& p, const std::string& base_dir) {
  ASSIGN_OR_RETURN(std::optional<TensorBytes> b, TensorBytesFromProto(p, base_dir));
  if (b) return HostTensor::FromBytes(b->dtype, std::move(b->shape), b->bytes.data());
  auto fail = [&](const absl::Status& s) { return Described(p, s); };
  ASSIGN_OR_RETURN(CheckedTensor c, CheckTensor(p));  // passed above
  const int64_t numel = c.numel;
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
  HostTensor h(c.dtype, c.shape);
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

absl::StatusOr<HostTensor> DenseFromSparse(const onnx::SparseTensorProto& sp,
                                           const std::string& base_dir) {
  ASSIGN_OR_RETURN(HostTensor values, HostTensorFromProto(sp.values(), base_dir));
  ASSIGN_OR_RETURN(HostTensor indices, HostTensorFromProto(sp.indices(), base_dir));
  Shape shape(sp.dims().begin(), sp.dims().end());
  ASSIGN_OR_RETURN(int64_t total, CheckedNumel(shape, kMaxHostElements, "its dense form"));
  const int64_t nnz = values.numel(), rank = static_cast<int64_t>(shape.size());
  const bool linear = indices.ndim() == 1;
  if ((linear && indices.numel() != nnz) ||
      (!linear && (indices.ndim() != 2 || indices.shape[0] != nnz || indices.shape[1] != rank)))
    return absl::InvalidArgumentError("bad indices shape");
  HostTensor dense(values.dtype, shape);
  const std::vector<int64_t> idx = indices.Int64s();
  const int item = values.dtype.ItemSize();
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t flat = 0;
    if (linear) {
      flat = idx[k];
    } else {
      for (int64_t d = 0; d < rank && flat >= 0; ++d) {
        const int64_t i = idx[k * rank + d];
        flat = (i < 0 || i >= shape[d]) ? -1 : flat * shape[d] + i;
      }
    }
    if (flat < 0 || flat >= total) return absl::InvalidArgumentError("index out of range");
    std::memcpy(dense.data.data() + flat * item, values.data.data() + k * item, item);
  }
  return dense;
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path, int64_t max_bytes) {
  int64_t size = 0;
  ASSIGN_OR_RETURN(int fd_num, OpenRegular(path, "file", &size));
  Fd fd(fd_num);
  auto too_big = [&](int64_t n) {
    return absl::ResourceExhaustedError(absl::StrCat("'", path, "' is ", n > size ? "over " : "",
                                                     n, " bytes, more than the limit of ",
                                                     max_bytes, " bytes"));
  };
  if (size > max_bytes) return too_big(size);
  // Read to the end (the file may have changed since fstat), never past the
  // limit.
  std::string out;
  out.resize(static_cast<size_t>(size));
  int64_t done = 0;
  while (true) {
    if (done == static_cast<int64_t>(out.size())) {
      if (done > max_bytes) return too_big(done);
      out.resize(static_cast<size_t>(std::min<int64_t>(max_bytes + 1, done + (int64_t{1} << 20))));
      if (done == static_cast<int64_t>(out.size())) return too_big(done);
    }
    ssize_t r = ::read(fd.get(), out.data() + done, out.size() - static_cast<size_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return absl::DataLossError(absl::StrCat("error reading '", path, "': ", std::strerror(errno)));
    if (r == 0) break;
    done += r;
  }
  if (done > max_bytes) return too_big(done);
  out.resize(static_cast<size_t>(done));
  return out;
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
