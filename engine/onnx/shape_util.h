// Shape arithmetic shared by the device and host (constant-folding)
// versions of the movement operators.
#ifndef KILN_ENGINE_ONNX_SHAPE_UTIL_H_
#define KILN_ENGINE_ONNX_SHAPE_UTIL_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/onnx/op_context.h"

namespace kiln {

// Reshape target with 0 (copy the input dim unless allowzero) and -1.
absl::StatusOr<Shape> ReshapeTarget(const Shape& in, const std::vector<int64_t>& target,
                                    bool allowzero);
// Flatten to 2-D at `axis` (may be negative or equal to the rank).
absl::StatusOr<Shape> FlattenShape(const Shape& in, int64_t axis);
// The `perm` attribute (default: reversed axes), validated.
absl::StatusOr<std::vector<int64_t>> TransposePerm(const OpContext& ctx, int64_t rank);
// Squeeze: drop `axes` (must be 1) or every 1-dim when absent.
absl::StatusOr<Shape> SqueezeShape(const Shape& in, const std::optional<std::vector<int64_t>>& axes);
// Unsqueeze: insert 1-dims at `axes` (of the output rank).
absl::StatusOr<Shape> UnsqueezeShape(const Shape& in, const std::vector<int64_t>& axes);
// Split sizes: given sizes (validated) or an even split into `outputs`
// parts (the last one smaller when num_outputs is given and it does not divide).
absl::StatusOr<std::vector<int64_t>> SplitSizes(int64_t dim, const std::vector<int64_t>& sizes,
                                                int outputs, int64_t num_outputs_attr);
// Per-axis slices of a Slice node (attributes before opset 10, inputs after).
absl::StatusOr<std::vector<Tensor::Slice>> SliceArgs(const OpContext& ctx, const Shape& shape);
// Range(start, limit, delta) values, in the dtype of `start`.
absl::StatusOr<HostTensor> RangeValues(const HostTensor& start, const HostTensor& limit,
                                       const HostTensor& delta);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_SHAPE_UTIL_H_
