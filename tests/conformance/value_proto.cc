#include "tests/conformance/value_proto.h"

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace kiln {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

absl::StatusOr<HostTensor> ParseTensor(const std::string& bytes) {
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) return absl::InvalidArgumentError("bad TensorProto");
  return HostTensorFromProto(p);
}

// SequenceProto and OptionalProto share the layout that matters here:
// 3 = tensor value(s), 5 = sequence value(s), 7 = optional value(s).
absl::StatusOr<ExpectedValue> ParseContainer(const std::string& bytes, ExpectedValue::Kind kind,
                                             int depth) {
  if (depth > 8) return absl::InvalidArgumentError("values nest too deeply");
  ExpectedValue v;
  v.kind = kind;
  CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                      static_cast<int>(bytes.size()));
  while (uint32_t tag = in.ReadTag()) {
    int field = WireFormatLite::GetTagFieldNumber(tag);
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED &&
        (field == 3 || field == 5 || field == 7)) {
      std::string sub;
      if (!WireFormatLite::ReadBytes(&in, &sub))
        return absl::InvalidArgumentError("truncated value proto");
      if (field == 3) {
        ExpectedValue t;
        ASSIGN_OR_RETURN(t.tensor, ParseTensor(sub));
        v.items.push_back(std::move(t));
      } else {
        ASSIGN_OR_RETURN(ExpectedValue inner,
                         ParseContainer(sub,
                                        field == 5 ? ExpectedValue::Kind::kSequence
                                                   : ExpectedValue::Kind::kOptional,
                                        depth + 1));
        v.items.push_back(std::move(inner));
      }
      continue;
    }
    if (!WireFormatLite::SkipField(&in, tag))
      return absl::InvalidArgumentError("malformed value proto");
  }
  return v;
}

}  // namespace

absl::StatusOr<ExpectedValue> ReadValueFile(const std::string& path, const ValueInfo& info) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  absl::StatusOr<ExpectedValue> v;
  if (info.is_optional) {
    v = ParseContainer(bytes, ExpectedValue::Kind::kOptional, 0);
  } else if (info.is_sequence) {
    v = ParseContainer(bytes, ExpectedValue::Kind::kSequence, 0);
  } else {
    ExpectedValue t;
    auto h = ParseTensor(bytes);
    if (h.ok()) t.tensor = std::move(*h);
    // ONNX 1.12's generator stores bfloat16 data as uint16 bit patterns
    // (numpy has no bfloat16); the model's declared type says which it is.
    if (h.ok() && info.dtype == dtypes::kBFloat16 && t.tensor.dtype == dtypes::kUInt16)
      t.tensor.dtype = dtypes::kBFloat16;
    v = h.ok() ? absl::StatusOr<ExpectedValue>(std::move(t)) : h.status();
  }
  if (!v.ok()) return absl::Status(v.status().code(), absl::StrCat(path, ": ", v.status().message()));
  return v;
}

OnnxValue ToInputValue(const ExpectedValue& v, Engine* engine, const std::string& device) {
  OnnxValue out;
  switch (v.kind) {
    case ExpectedValue::Kind::kTensor: {
      const HostTensor& h = v.tensor;
      return OnnxValue::FromTensor(
          Tensor::FromData(engine, h.data.data(), h.data.size(), h.shape, h.dtype, device));
    }
    case ExpectedValue::Kind::kSequence:
      out.kind = OnnxValue::Kind::kSequence;
      break;
    case ExpectedValue::Kind::kOptional:
      out.kind = OnnxValue::Kind::kOptional;
      break;
  }
  for (const ExpectedValue& item : v.items) out.items.push_back(ToInputValue(item, engine, device));
  if (!out.items.empty()) out.elem_type = out.items[0].dtype();
  return out;
}

}  // namespace kiln
