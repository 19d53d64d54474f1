// Reading the test-data files of ONNX's backend tests: a TensorProto, or
// for sequence / optional typed values a SequenceProto / OptionalProto
// (onnx-data.proto, which Debian does not ship; decoded here from the wire
// format: field 3 holds tensor values, field 5 nested sequences).
#ifndef KILN_TESTS_CONFORMANCE_VALUE_PROTO_H_
#define KILN_TESTS_CONFORMANCE_VALUE_PROTO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/onnx/model.h"
#include "engine/onnx/op_context.h"

namespace kiln {

struct ExpectedValue {
  enum class Kind { kTensor, kSequence, kOptional };
  Kind kind = Kind::kTensor;
  HostTensor tensor;
  std::vector<ExpectedValue> items;  // sequence elements / optional content
};

// Reads `path` as the type `info` declares (bfloat16 values stored as
// uint16 bit patterns, as ONNX 1.12's test generator writes them, are read
// as bfloat16).
absl::StatusOr<ExpectedValue> ReadValueFile(const std::string& path, const ValueInfo& info);

// A model input from a decoded value (tensors are uploaded as buffers).
OnnxValue ToInputValue(const ExpectedValue& v, Engine* engine, const std::string& device);

}  // namespace kiln

#endif  // KILN_TESTS_CONFORMANCE_VALUE_PROTO_H_
