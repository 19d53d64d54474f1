// OnnxModel: an ONNX model loaded for kiln's lazy Tensor engine.
//
//   ASSIGN_OR_RETURN(auto model, OnnxModel::Load("model.onnx", &engine, "CPU"));
//   for (const ValueInfo& in : model->inputs()) ...   // name, dtype, dims (-1 dynamic)
//   ASSIGN_OR_RETURN(std::vector<Tensor> outs, model->Run({x}));
//   Tensor::RealizeAll({&outs[0], ...});
//
// Load reads the file (a regular file, at most 2 GiB), parses the
// ModelProto, validates its graphs (graph_check.h: unknown operators,
// undefined values, cycles, unsupported input types fail the load), checks
// the opsets, decodes every initializer and top-level Constant node
// (PaddleOCR keeps all weights in Constant nodes) and uploads them to the
// device once. Run builds the lazy graph of the model for the given input
// tensors and returns the output tensors unrealized; shape arithmetic is
// folded on the host at build time. Nothing in a model file or an input
// aborts: sizes are checked before they are allocated, and a load that
// still runs out of memory returns RESOURCE_EXHAUSTED.
//
// Thread safety: after Load, Run may be called from several threads at once.
#ifndef KILN_ENGINE_ONNX_MODEL_H_
#define KILN_ENGINE_ONNX_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/onnx/batch_split.h"
#include "engine/onnx/graph_builder.h"
#include "engine/tensor/tensor.h"

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace kiln {

struct ValueInfo {
  std::string name;
  DType dtype = dtypes::kFloat32;
  // -1 for a dynamic dimension (dim_param or no value); empty with
  // rank_known == false when the graph declares no shape at all.
  std::vector<int64_t> dims;
  std::vector<std::string> dim_params;  // the symbolic names ("" if none)
  bool rank_known = true;
  bool is_sequence = false;  // a sequence of tensors of `dtype`
  bool is_optional = false;  // an optional tensor / sequence
};

class OnnxModel {
 public:
  static absl::StatusOr<std::unique_ptr<OnnxModel>> Load(const std::string& path, Engine* engine,
                                                         const std::string& device = "CPU");
  // `base_dir` is where external data files are looked up.
  static absl::StatusOr<std::unique_ptr<OnnxModel>> LoadFromBytes(
      const std::string& bytes, Engine* engine, const std::string& device = "CPU",
      const std::string& base_dir = "");
  ~OnnxModel();

  // Graph inputs that are not initializers, in graph order; and outputs.
  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  const OpsetMap& opsets() const { return opsets_; }
  int64_t ir_version() const { return ir_version_; }
  const std::string& device() const { return device_; }
  // Initializers whose layout the load changed (prepack.h).
  int prepacked() const { return prepacked_; }
  // Weights derived from the model's constants so far (derived_weights.h).
  size_t derived_weights() const;

  // Builds the graph for `inputs` (one per inputs(), in order; dtypes and
  // static dims must match) and returns the unrealized outputs. A batch
  // (inputs with a dynamic axis 0 of one size n > 1) of a model that
  // computes image by image is built in slices of images when its
  // intermediates outgrow the caches (batch_split.h).
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs) const;
  // How Run builds a batch of these inputs' signature, once it has run one.
  std::optional<BatchSplitter::Choice> BatchChoice(const std::vector<Tensor>& inputs) const;
  // Like Run, but outputs may also be sequences / optionals.
  absl::StatusOr<std::vector<OnnxValue>> RunValues(const std::vector<OnnxValue>& inputs) const;

 private:
  OnnxModel() = default;
  // Load / LoadFromBytes without their catch of allocation failures.
  static absl::StatusOr<std::unique_ptr<OnnxModel>> LoadChecked(const std::string& path,
                                                                Engine* engine,
                                                                const std::string& device);
  static absl::StatusOr<std::unique_ptr<OnnxModel>> LoadFromBytesChecked(
      const std::string& bytes, Engine* engine, const std::string& device,
      const std::string& base_dir);
  absl::Status Init(const std::string& base_dir);
  // RunValues with `tracker` (may be null) observing every top-level node.
  absl::StatusOr<std::vector<OnnxValue>> Build(const std::vector<OnnxValue>& inputs,
                                               BatchTracker* tracker) const;

  Engine* engine_ = nullptr;
  std::string device_;
  std::unique_ptr<onnx::ModelProto> proto_;
  OpsetMap opsets_;
  int64_t ir_version_ = 0;
  int prepacked_ = 0;
  std::vector<ValueInfo> inputs_, outputs_;
  Scope weights_;
  // Winograd weights etc., derived from weights_ at first use.
  std::unique_ptr<DerivedWeights> derived_;
  std::map<std::string, const onnx::FunctionProto*> functions_;
  std::unique_ptr<BatchSplitter> splitter_;
};

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_MODEL_H_
