// ShapeTracker: a stack of Views. Movement ops apply to the top view; a
// reshape that one view cannot express pushes a new view. The top view's
// index addresses the flattened shape of the view below it, and so on down to
// the buffer. Views merge when they can. Immutable value type.
//
//   ShapeTracker::FromShape({10,10}).Permute({1,0})          strides (1,10)
//     .Reshape({5,2,5,2}).Reshape({100})   index ((idx0%10)*10)+(idx0//10)
#ifndef KILN_ENGINE_SHAPE_SHAPE_TRACKER_H_
#define KILN_ENGINE_SHAPE_SHAPE_TRACKER_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/shape/view.h"

namespace kiln {

class ShapeTracker {
 public:
  static ShapeTracker FromShape(const Shape& shape);
  explicit ShapeTracker(std::vector<View> views);

  const std::vector<View>& views() const { return views_; }
  const View& view() const { return views_.back(); }
  const Shape& shape() const { return views_.back().shape(); }
  size_t ndim() const { return shape().size(); }
  int64_t size() const { return Prod(shape()); }
  // One view, offset 0, row-major, no mask.
  bool contiguous() const { return views_.size() == 1 && views_[0].contiguous(); }
  // Strides of the single view; nullopt if there are several views.
  std::optional<std::vector<int64_t>> SingleViewStrides() const;
  // True if some element reads as zero through a mask.
  bool HasMask() const;

  ShapeTracker Permute(const std::vector<int>& order) const;
  ShapeTracker Expand(const Shape& new_shape) const;
  ShapeTracker Pad(const std::vector<std::pair<int64_t, int64_t>>& pads) const;
  ShapeTracker Shrink(const std::vector<std::pair<int64_t, int64_t>>& bounds) const;
  ShapeTracker Flip(const std::vector<bool>& axes) const;
  // Dim `axis`, `size` long, from the symbolic index `start` (an expression
  // of bound variables: UOp::Bind) on; see View::ShrinkAt.
  ShapeTracker ShrinkAt(int axis, const UOpRef& start, int64_t size) const;
  ShapeTracker Stride(const std::vector<int64_t>& steps) const;
  ShapeTracker Reshape(const Shape& new_shape) const;
  // Grows dim `axis` of the top view to `size` (>= its size) when the top
  // view's stride there is 0: the new indices read the same elements (and
  // keep that dim's mask range, if any).
  ShapeTracker ExtendBroadcast(int axis, int64_t size) const;
  // Applies `top` on top of this: top's bottom view indexes this tracker's
  // flattened shape (e.g. top = FromShape(shape()).Permute(...)).
  ShapeTracker Compose(const ShapeTracker& top) const;

  // Buffer index and validity (bool) for per-dim indices, simplified.
  std::pair<UOpRef, UOpRef> ToIndex(const UOpList& idxs) const;
  // Only the validity of ToIndex (the address of the bottom view is not
  // built: a gate's comparisons are all a kernel's heuristics read).
  UOpRef ToValid(const UOpList& idxs) const;
  // Same, with variables idx0..idxN-1 spanning the shape.
  std::pair<UOpRef, UOpRef> ToIndexVars() const;
  // Largest buffer index + 1 the tracker can touch.
  int64_t RealSize() const;

  // True when a view's symbolic offset holds bound variables.
  bool HasBinds() const;
  // The same tracker with every bound variable replaced by the variable
  // itself; the values go to *vals (name -> value). False when one name is
  // bound to two values.
  bool Unbind(ShapeTracker* out, std::map<std::string, int64_t>* vals) const;

  bool operator==(const ShapeTracker& o) const { return views_ == o.views_; }
  size_t Hash() const;
  std::string ToString() const;

 private:
  void Simplify();
  std::pair<UOpRef, UOpRef> IndexAndValid(const UOpList& idxs, bool want_index) const;
  std::vector<View> views_;
};

// ShapeTracker as a UOp arg (kView / kLoad / kStore / kValid).
OpaqueRef StArg(ShapeTracker st);
// The ShapeTracker in a UOp's arg, or nullptr.
const ShapeTracker* StOf(const UOp& u);

}  // namespace kiln

#endif  // KILN_ENGINE_SHAPE_SHAPE_TRACKER_H_
