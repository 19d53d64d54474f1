// View: one strided window onto a flat buffer: shape, strides, offset and an
// optional validity mask (per dimension [lo, hi) ranges; outside it the
// element reads as zero — that is how padding works without copies).
// The offset may have a symbolic part: an integer expression of bound
// variables (UOp::Bind), e.g. t * 4096 for "row t" of a buffer. Kernels
// built from such a view take the variables as arguments, so one compiled
// kernel serves every value (the scheduler unbinds them, Unbind below).
// Immutable value type.
#ifndef KILN_ENGINE_SHAPE_VIEW_H_
#define KILN_ENGINE_SHAPE_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/uop/uop.h"

namespace kiln {

using Shape = std::vector<int64_t>;

// Row-major strides of `shape` (0 for size-1 dims).
std::vector<int64_t> ContiguousStrides(const Shape& shape);
int64_t Prod(const Shape& shape);

class View {
 public:
  using Mask = std::vector<std::pair<int64_t, int64_t>>;

  // Canonicalizes: size-1 dims get stride 0, a mask that covers everything is
  // dropped.
  static View Create(Shape shape, std::vector<int64_t> strides = {}, int64_t offset = 0,
                     std::optional<Mask> mask = std::nullopt);

  const Shape& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  const std::optional<Mask>& mask() const { return mask_; }
  // The symbolic part of the offset, or null.
  const UOpRef& symbolic_offset() const { return sym_; }
  // This view with `term` added to the symbolic offset.
  View AddSymbolicOffset(const UOpRef& term) const;
  // This view with the symbolic offset replaced by `sym` (may be null).
  View WithSymbolicOffset(UOpRef sym) const;
  bool contiguous() const { return contiguous_; }
  size_t ndim() const { return shape_.size(); }
  // True when the mask selects nothing.
  bool EmptyMask() const;

  // Zero-copy movement ops (always possible on one view).
  View Permute(const std::vector<int>& order) const;
  View Expand(const Shape& new_shape) const;  // size-1 dims only
  View Pad(const std::vector<std::pair<int64_t, int64_t>>& pads) const;
  View Shrink(const std::vector<std::pair<int64_t, int64_t>>& bounds) const;
  View Flip(const std::vector<bool>& axes) const;
  // Keeps `size` elements of dim `axis` from the symbolic index `start` on
  // (start's bounds keep it in range; the caller checks).
  View ShrinkAt(int axis, const UOpRef& start, int64_t size) const;
  // Keeps every step-th element (step > 0) along each dim.
  View Stride(const std::vector<int64_t>& steps) const;
  // Reinterprets the shape; nullopt when one view cannot express it.
  std::optional<View> Reshape(const Shape& new_shape) const;

  // The buffer index and validity of the element at `idxs` (one per dim).
  std::pair<UOpRef, UOpRef> ToIndex(const UOpList& idxs) const;
  // The largest buffer index + 1 this view can touch (0 if none).
  int64_t RealSize() const;

  bool operator==(const View& o) const {
    return shape_ == o.shape_ && strides_ == o.strides_ && offset_ == o.offset_ &&
           mask_ == o.mask_ && sym_ == o.sym_;
  }
  size_t Hash() const;
  std::string ToString() const;

 private:
  View() = default;
  Shape shape_;
  std::vector<int64_t> strides_;
  int64_t offset_ = 0;
  UOpRef sym_;  // symbolic part of the offset (interned: pointer equality)
  std::optional<Mask> mask_;
  bool contiguous_ = false;
};

}  // namespace kiln

#endif  // KILN_ENGINE_SHAPE_VIEW_H_
