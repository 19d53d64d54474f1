// Indexed loads (Tensor::GatherLoad) and the gathers built on them: one
// GATHER node that loads x at data-dependent places (O(output) work), where a
// one-hot compare-and-sum over the gathered axis would be O(output x axis).
#include "absl/strings/str_cat.h"
#include "engine/tensor/tensor.h"
#include "engine/tensor/tensor_internal.h"

namespace kiln {

Tensor Tensor::GatherLoad(const Tensor& x, int64_t axis, const Tensor& idx,
                          const std::vector<int64_t>& dims) {
  if (!x.ok()) return x;
  if (!idx.ok()) return idx;
  auto fail = [&](const std::string& why) {
    return TensorInternal::ErrorLike(x, absl::InvalidArgumentError(absl::StrCat(
                                            "gather_load: ", why, " (input ", ShapeStr(x.shape()),
                                            ", index ", ShapeStr(idx.shape()), ")")));
  };
  if (!idx.dtype().IsInt()) return fail("the index is not an integer tensor");
  if (idx.engine() != x.engine() || idx.device() != x.device())
    return fail("the index lives on another device");
  if (axis < 0 || axis >= x.ndim() || static_cast<int64_t>(dims.size()) != x.ndim())
    return fail("axis or dims out of range");
  std::vector<bool> used(idx.ndim(), false);
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (d == axis) continue;
    int64_t o = dims[d];
    if (o < 0 || o >= idx.ndim() || used[o] || idx.shape()[o] != x.shape()[d])
      return fail(absl::StrCat("input dim ", d, " does not map to an output dim of its size"));
    used[o] = true;
  }
  std::vector<int64_t> arg = {axis, x.shape()[axis]};
  arg.insert(arg.end(), dims.begin(), dims.end());
  arg[2 + axis] = -1;
  UOpRef u = UOp::Make(Op::kGather, x.dtype(), {x.uop(), idx.uop()}, Arg(arg));
  return x.Derive(u, idx.shape(), x.dtype());
}

}  // namespace kiln
