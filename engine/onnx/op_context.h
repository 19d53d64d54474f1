// OnnxValue and OpContext: what an ONNX op handler sees while the importer
// builds the lazy Tensor graph of a model.
//
// A value flowing between nodes is a device Tensor, a HostTensor known at
// graph-build time (constants, shapes and everything folded from them), or
// both; sequences (SequenceConstruct, ...) and optionals are values too.
// Handlers read inputs and attributes through OpContext and set outputs;
// the GraphBuilder prefixes any error they return with the node's name and
// op type. Not thread-safe (one graph build at a time).
#ifndef KILN_ENGINE_ONNX_OP_CONTEXT_H_
#define KILN_ENGINE_ONNX_OP_CONTEXT_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/onnx/host_tensor.h"
#include "engine/tensor/tensor.h"

namespace onnx {
class AttributeProto;
class GraphProto;
class NodeProto;
class TensorProto;
}  // namespace onnx

namespace kiln {

class GraphBuilder;

struct OnnxValue {
  enum class Kind { kNone, kTensor, kSequence, kOptional };
  Kind kind = Kind::kNone;  // kNone: an omitted optional input / output
  // kTensor: at least one of `tensor` (device) and `host` is set.
  std::optional<Tensor> tensor;
  // The same value computed in channel blocks (N, C / 16, H, W, 16) by a
  // chain of layers that keeps them (channel_blocks.h); `tensor` is then
  // its NCHW copy, computed only when an op outside the chain reads it.
  std::optional<Tensor> blocked;
  std::shared_ptr<const HostTensor> host;
  // kSequence: the elements; kOptional: zero or one element.
  std::vector<OnnxValue> items;
  // Element type of an empty sequence / optional (from the producing node).
  DType elem_type = dtypes::kFloat32;

  static OnnxValue FromTensor(Tensor t);
  static OnnxValue FromHost(HostTensor h);
  bool is_tensor() const { return kind == Kind::kTensor; }
  DType dtype() const;
  Shape shape() const;
};

class OpContext {
 public:
  OpContext(const onnx::NodeProto& node, int opset, GraphBuilder* builder,
            std::vector<const OnnxValue*> inputs);

  const onnx::NodeProto& node() const { return node_; }
  const std::string& op_type() const;
  // The opset version of the node's domain.
  int opset() const { return opset_; }
  Engine* engine() const;
  const std::string& device() const;
  GraphBuilder* builder() const { return builder_; }

  // ---- inputs ----
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // True when input i exists and is not omitted ("").
  bool Has(int i) const;
  const OnnxValue& Raw(int i) const;
  // The device tensor of input i (uploaded from its host value if needed).
  absl::StatusOr<Tensor> In(int i) const;
  // The host value of input i, or null when it is only known on the device.
  const HostTensor* Host(int i) const;
  // The value of input i on the host: its host value, or else the tensor is
  // realized and read back (which runs kernels when it is not a buffer).
  absl::StatusOr<HostTensor> Static(int i) const;
  absl::StatusOr<std::vector<int64_t>> StaticInts(int i) const;
  absl::StatusOr<std::vector<double>> StaticDoubles(int i) const;
  DType Type(int i) const;
  Shape ShapeOf(int i) const;
  // Fails unless the node has between lo and hi inputs (omitted ones count).
  absl::Status CheckInputs(int lo, int hi) const;

  // ---- outputs ----
  int num_outputs() const;
  // True when output i exists and has a name.
  bool Wants(int i) const;
  void Set(int i, Tensor t);
  void SetHost(int i, HostTensor h);
  void SetValue(int i, OnnxValue v);
  std::vector<OnnxValue>& outputs() { return outputs_; }

  // ---- attributes (a wrong attribute type is reported after the handler) ----
  const onnx::AttributeProto* Attr(const std::string& name) const;
  bool HasAttr(const std::string& name) const { return Attr(name) != nullptr; }
  int64_t Int(const std::string& name, int64_t def) const;
  float Float(const std::string& name, float def) const;
  std::string Str(const std::string& name, const std::string& def) const;
  std::vector<int64_t> Ints(const std::string& name) const;
  std::vector<float> Floats(const std::string& name) const;
  std::vector<std::string> Strs(const std::string& name) const;
  const onnx::TensorProto* TensorAttr(const std::string& name) const;
  const onnx::GraphProto* Graph(const std::string& name) const;
  const absl::Status& attr_error() const { return attr_error_; }
  // Names of the attributes the handler looked at (others are unsupported).
  const std::set<std::string>& read_attrs() const { return read_attrs_; }

 private:
  const onnx::AttributeProto* Typed(const std::string& name, int type) const;

  const onnx::NodeProto& node_;
  const int opset_;
  GraphBuilder* const builder_;
  std::vector<const OnnxValue*> inputs_;
  std::vector<OnnxValue> outputs_;
  mutable absl::Status attr_error_;
  mutable std::set<std::string> read_attrs_;
};

// Normalizes a possibly negative axis for rank `rank`; error when out of range.
absl::StatusOr<int64_t> NormAxis(int64_t axis, int64_t rank);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_OP_CONTEXT_H_
