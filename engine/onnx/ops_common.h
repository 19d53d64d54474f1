// Helpers shared by the ops_*.cc files of the ONNX importer.
#ifndef KILN_ENGINE_ONNX_OPS_COMMON_H_
#define KILN_ENGINE_ONNX_OPS_COMMON_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/onnx/op_context.h"
#include "engine/onnx/op_registry.h"

namespace onnx {
class NodeProto;
}  // namespace onnx

namespace kiln {

// The value of a Constant node (value / value_float(s) / value_int(s) /
// sparse_value attributes).
absl::StatusOr<HostTensor> ConstantNodeValue(const onnx::NodeProto& node, int opset,
                                             const std::string& base_dir);

inline absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }
inline absl::Status Unsupported(const std::string& msg) { return absl::UnimplementedError(msg); }

// Normalizes axes for `rank` (negative count from the end); error on out of
// range or repeated axes. Keeps the given order.
absl::StatusOr<std::vector<int64_t>> NormAxes(const std::vector<int64_t>& axes, int64_t rank);

// The `axes` of ops that moved it from an attribute to input `input` in
// opset `since` (Squeeze, Unsqueeze, Reduce*): nullopt when absent.
absl::StatusOr<std::optional<std::vector<int64_t>>> AxesArg(const OpContext& ctx, int input,
                                                            int since);

// A scalar of `t`'s dtype.
inline Tensor ScalarOf(const Tensor& t, double v) { return t.Scalar(v); }

// Broadcasts `t` to `shape` (numpy rules; `shape` may have fewer dims).
absl::StatusOr<Tensor> BroadcastTo(const Tensor& t, const Shape& shape);

// Indices as int64, negative ones counted from the end of a dim of size n.
inline Tensor WrapIndices(const Tensor& idx, int64_t n) {
  Tensor i = idx.Cast(dtypes::kInt64);
  return Tensor::Where(i.Lt(i.Scalar(0)), i + static_cast<double>(n), i);
}

// A matmul of `a` by the node's own constant weight (input 1, or `b`, a
// part of it that `part` names in the cache key: an RNN's direction),
// stored (N, K) when `transposed`, from panels (tensor_panels.cc) where
// Tensor::PanelsPay, on the CPU: the panels are made once per model
// (DerivedWeights). Nothing otherwise, or when they cannot be made: the
// caller multiplies plainly. (ops_nn.cc)
std::optional<Tensor> PanelMatmul(OpContext& ctx, const Tensor& a, const Tensor& b,
                                  bool transposed, const std::string& part = "");

// The panels PanelMatmul multiplies by, for an `a` of `m` rows, of the
// node's constant input `input` (or `b`, the part of it `part` names):
// an RNN's recurrent weight R, whose steps multiply each h by the same
// panels. Nothing where they do not pay or cannot be made.
std::optional<Tensor> WeightPanels(OpContext& ctx, int64_t m, const Tensor& b, bool transposed,
                                   const std::string& part = "", int input = 1);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_OPS_COMMON_H_
