// BatchTracker: whether a model computes each image of a batch from that
// image alone, judged from the graph built at full batch, node by node, with
// the shapes the build computed (nothing is realized for it). Every value is
// one of:
//   constant  depends on no batched input (weights, folded shapes);
//   batched   axis 0 is the batch, image i depends on input image i only;
//   sized     depends on the batch size but not on the data (Shape(x) and
//             the arithmetic on it): allowed only where a node reads a shape
//             (a Reshape target, Resize sizes, Split sizes), which a slice's
//             own build then computes for its own size. Shape arithmetic is
//             followed element by element (Dependence): Shape(x)[2], the
//             height, is a constant.
// Each operator is judged by the rule of its table entry (batch_tracker.cc):
// elementwise with constants that broadcast over the batch, per-image
// operators (convolutions, pools, normalizations in inference mode), row-
// major reshapes that keep the batch as axis 0, axis operators away from
// axis 0, and matrix products whose rows are the batch. An operator without
// an entry, a subgraph or a function call with a batched or sized input
// makes the model not separable (the first such node is reported), as does
// a graph output that is not batched. The tracker is conservative: a model
// it refuses runs as before, at full batch (batch_split.h).
//
// Not thread-safe: one tracker per graph build.
#ifndef KILN_ENGINE_ONNX_BATCH_TRACKER_H_
#define KILN_ENGINE_ONNX_BATCH_TRACKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "engine/onnx/op_context.h"

namespace onnx {
class NodeProto;
}  // namespace onnx

namespace kiln {

class BatchTracker {
 public:
  // `batched`: the graph inputs whose axis 0 (of size n > 1) is the batch.
  BatchTracker(int64_t n, const std::vector<std::string>& batched);

  // After `node` was built: its inputs and outputs as built (null where
  // omitted or unknown).
  void Observe(const onnx::NodeProto& node, const std::vector<const OnnxValue*>& ins,
               const std::vector<const OnnxValue*>& outs);

  // OK when every output in `outputs` is batched and no node mixed images;
  // otherwise FAILED_PRECONDITION naming the first node (or output) that
  // does.
  absl::Status Separable(const std::vector<std::string>& outputs) const;

  // OK when `other` (the same graph built for a slice of the batch) saw
  // every value in the same state and every batched value with the same
  // shape per image: nothing in the graph depends on the batch size but
  // axis 0 (a Reshape to a constant (8, -1) does; so would a shape
  // computed from the batch size).
  absl::Status SameImages(const BatchTracker& other) const;

  // Bytes per image of the batched device values that are not `outputs`
  // nor views (a Reshape's): the intermediates, written by one kernel and
  // read back by another (a graph output is only written). The largest, and
  // the sum of those over `limit` bytes for the whole batch.
  double LargestIntermediate(const std::vector<std::string>& outputs) const;
  double IntermediatesOver(double limit, const std::vector<std::string>& outputs) const;
  // Bytes of the constants (weights) read by nodes that compute on batched
  // values, each counted once.
  double WeightBytes() const;

 private:
  enum class State { kConst, kBatched, kSized };
  State Of(const std::string& name) const;
  // The state of `node`'s outputs, or an error saying why it mixes images.
  absl::Status Judge(const onnx::NodeProto& node, const std::vector<const OnnxValue*>& ins,
                     const std::vector<const OnnxValue*>& outs, State* out) const;

  // Which elements of a sized shape vector depend on the batch size
  // (nullopt: not known element by element).
  std::optional<std::vector<bool>> Dependence(const onnx::NodeProto& node,
                                              const std::vector<const OnnxValue*>& ins,
                                              const OnnxValue* out) const;

  int64_t n_;
  std::unordered_map<std::string, State> state_;  // absent: kConst
  std::unordered_map<std::string, Shape> image_shape_;  // batched values, without axis 0
  std::unordered_map<std::string, std::vector<bool>> dependence_;  // see Dependence
  absl::Status failure_;
  // Batched device values computed by a node (not a view), per image.
  std::unordered_map<std::string, double> image_bytes_;
  std::unordered_map<std::string, double> weight_bytes_;  // constants read with batched values
};

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_BATCH_TRACKER_H_
