#include "engine/shape/shape_tracker.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/uop/symbolic.h"

namespace kiln {

ShapeTracker ShapeTracker::FromShape(const Shape& shape) {
  return ShapeTracker({View::Create(shape)});
}

ShapeTracker::ShapeTracker(std::vector<View> views) : views_(std::move(views)) {
  KILN_CHECK(!views_.empty(), "a ShapeTracker needs a view");
  Simplify();
}

void ShapeTracker::Simplify() {
  while (views_.size() >= 2) {
    const View& lo = views_[views_.size() - 2];
    const View& hi = views_.back();
    if (hi.contiguous() && Prod(hi.shape()) == Prod(lo.shape())) {
      if (std::optional<View> merged = lo.Reshape(hi.shape())) {
        views_.pop_back();
        views_.back() = *merged;
        continue;
      }
    }
    if (lo.contiguous()) {  // the lower view is the identity on the buffer
      views_.erase(views_.end() - 2);
      continue;
    }
    break;
  }
}

std::optional<std::vector<int64_t>> ShapeTracker::SingleViewStrides() const {
  if (views_.size() != 1) return std::nullopt;
  return views_[0].strides();
}

bool ShapeTracker::HasMask() const {
  for (const View& v : views_)
    if (v.mask()) return true;
  return false;
}

namespace {
ShapeTracker WithTop(const std::vector<View>& views, View top) {
  std::vector<View> v = views;
  v.back() = std::move(top);
  return ShapeTracker(std::move(v));
}
}  // namespace

ShapeTracker ShapeTracker::Permute(const std::vector<int>& order) const {
  return WithTop(views_, view().Permute(order));
}
ShapeTracker ShapeTracker::Expand(const Shape& s) const { return WithTop(views_, view().Expand(s)); }
ShapeTracker ShapeTracker::Pad(const std::vector<std::pair<int64_t, int64_t>>& p) const {
  return WithTop(views_, view().Pad(p));
}
ShapeTracker ShapeTracker::Shrink(const std::vector<std::pair<int64_t, int64_t>>& b) const {
  return WithTop(views_, view().Shrink(b));
}
ShapeTracker ShapeTracker::Flip(const std::vector<bool>& axes) const {
  return WithTop(views_, view().Flip(axes));
}
ShapeTracker ShapeTracker::Stride(const std::vector<int64_t>& steps) const {
  return WithTop(views_, view().Stride(steps));
}

ShapeTracker ShapeTracker::Reshape(const Shape& ns) const {
  if (std::optional<View> v = view().Reshape(ns)) return WithTop(views_, *v);
  std::vector<View> v = views_;
  v.push_back(View::Create(ns));
  return ShapeTracker(std::move(v));
}

ShapeTracker ShapeTracker::Compose(const ShapeTracker& top) const {
  // The top tracker's bottom view addresses our flattened shape.
  std::vector<View> v = views_;
  for (const View& t : top.views_) v.push_back(t);
  return ShapeTracker(std::move(v));
}

std::pair<UOpRef, UOpRef> ShapeTracker::ToIndex(const UOpList& idxs) const {
  auto [idx, valid] = views_.back().ToIndex(idxs);
  for (size_t k = views_.size() - 1; k-- > 0;) {
    const View& v = views_[k];
    UOpList sub(v.ndim());
    UOpRef flat = kiln::Simplify(idx);
    int64_t acc = 1;
    for (size_t d = v.ndim(); d-- > 0;) {
      UOpRef e = acc == 1 ? flat : flat / acc;
      sub[d] = d == 0 ? e : e % v.shape()[d];
      acc *= v.shape()[d];
    }
    auto [i2, v2] = v.ToIndex(sub);
    idx = i2;
    valid = LogicalAnd(valid, v2);
  }
  return {kiln::Simplify(idx), kiln::Simplify(valid)};
}

std::pair<UOpRef, UOpRef> ShapeTracker::ToIndexVars() const {
  UOpList idxs;
  for (size_t i = 0; i < ndim(); ++i)
    idxs.push_back(UOp::Variable(absl::StrCat("idx", i), 0, std::max<int64_t>(shape()[i] - 1, 0)));
  return ToIndex(idxs);
}

int64_t ShapeTracker::RealSize() const { return views_.front().RealSize(); }

size_t ShapeTracker::Hash() const {
  size_t h = views_.size();
  for (const View& v : views_) h = h * 1000003u ^ v.Hash();
  return h;
}

std::string ShapeTracker::ToString() const {
  std::vector<std::string> parts;
  for (const View& v : views_) parts.push_back(v.ToString());
  return absl::StrCat("ShapeTracker(", absl::StrJoin(parts, ", "), ")");
}

namespace {
class StArgImpl : public OpaqueArg {
 public:
  explicit StArgImpl(ShapeTracker st) : st_(std::move(st)), hash_(st_.Hash()) {}
  size_t Hash() const override { return hash_; }
  bool Equals(const OpaqueArg& o) const override {
    const auto* other = dynamic_cast<const StArgImpl*>(&o);
    return other && other->hash_ == hash_ && other->st_ == st_;
  }
  std::string ToString() const override { return st_.ToString(); }
  const ShapeTracker& st() const { return st_; }

 private:
  ShapeTracker st_;
  size_t hash_;
};
}  // namespace

OpaqueRef StArg(ShapeTracker st) { return std::make_shared<StArgImpl>(std::move(st)); }

const ShapeTracker* StOf(const UOp& u) {
  const auto* a = u.arg().As<StArgImpl>();
  return a ? &a->st() : nullptr;
}

}  // namespace kiln
