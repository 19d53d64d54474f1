#include "engine/shape/shape_tracker.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/uop/pattern.h"
#include "engine/uop/symbolic.h"

#include <unordered_map>

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
ShapeTracker ShapeTracker::ShrinkAt(int axis, const UOpRef& start, int64_t size) const {
  return WithTop(views_, view().ShrinkAt(axis, start, size));
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

ShapeTracker ShapeTracker::ExtendBroadcast(int axis, int64_t size) const {
  const View& v = view();
  KILN_CHECK(axis >= 0 && axis < static_cast<int>(v.ndim()) && v.strides()[axis] == 0 &&
                 size >= v.shape()[axis],
             "ExtendBroadcast: axis ", axis, " of ", ToString());
  Shape shape = v.shape();
  shape[axis] = size;
  return WithTop(views_, View::Create(shape, v.strides(), v.offset(), v.mask())
                             .WithSymbolicOffset(v.symbolic_offset()));
}

ShapeTracker ShapeTracker::Compose(const ShapeTracker& top) const {
  // The top tracker's bottom view addresses our flattened shape.
  std::vector<View> v = views_;
  for (const View& t : top.views_) v.push_back(t);
  return ShapeTracker(std::move(v));
}

std::pair<UOpRef, UOpRef> ShapeTracker::ToIndex(const UOpList& idxs) const {
  return IndexAndValid(idxs, /*want_index=*/true);
}

UOpRef ShapeTracker::ToValid(const UOpList& idxs) const {
  return IndexAndValid(idxs, /*want_index=*/false).second;
}

std::pair<UOpRef, UOpRef> ShapeTracker::IndexAndValid(const UOpList& idxs, bool want_index) const {
  // Inside a view's mask each index lies in [lo, hi). The address is built
  // from placeholder variables with exactly those bounds (so the div / mod of
  // padded or shrunk offsets fold away), and the placeholders are replaced by
  // the real index expressions at the end. Outside the mask the address is
  // never used: loads and stores there are gated by the validity, which is
  // false wherever a placeholder would differ from its real value.
  std::unordered_map<const UOp*, UOpRef> back;
  UOpList keep;
  auto bounded = [&](const View& v, const UOpList& in) {
    if (!v.mask()) return in;
    UOpList out = in;
    for (size_t d = 0; d < in.size(); ++d) {
      auto [lo, hi] = (*v.mask())[d];
      if (lo >= hi || in[d]->IsConst() || (in[d]->vmin() >= lo && in[d]->vmax() < hi)) continue;
      UOpRef p = UOp::Variable(absl::StrCat("_m", back.size()), lo, hi - 1, in[d]->dtype());
      back[p.get()] = in[d];
      keep.push_back(p);
      out[d] = p;
    }
    return out;
  };
  const View& top = views_.back();
  // The top view's address feeds the views below it; with one view and no
  // address wanted it is not built.
  UOpRef idx = want_index || views_.size() > 1 ? top.ToIndex(bounded(top, idxs)).first : nullptr;
  UOpRef valid = top.ToIndex(idxs).second;
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
    for (UOpRef& e : sub) e = kiln::Simplify(e);
    UOpRef v2 = v.ToIndex(sub).second;
    valid = LogicalAnd(valid, v2);
    // The bottom view's address is the result: built only when wanted.
    idx = want_index || k > 0 ? v.ToIndex(bounded(v, sub)).first : nullptr;
  }
  if (idx) idx = kiln::Simplify(idx);
  valid = kiln::Simplify(valid);
  if (!back.empty()) {
    // Placeholders may stand for expressions of other placeholders.
    for (size_t round = 0; round < back.size(); ++round) {
      if (idx) idx = Substitute(idx, back);
      valid = Substitute(valid, back);
    }
    if (idx) idx = kiln::Simplify(idx);
    valid = kiln::Simplify(valid);
  }
  return {idx, valid};
}

std::pair<UOpRef, UOpRef> ShapeTracker::ToIndexVars() const {
  UOpList idxs;
  for (size_t i = 0; i < ndim(); ++i)
    idxs.push_back(UOp::Variable(absl::StrCat("idx", i), 0, std::max<int64_t>(shape()[i] - 1, 0)));
  return ToIndex(idxs);
}

int64_t ShapeTracker::RealSize() const { return views_.front().RealSize(); }

bool ShapeTracker::HasBinds() const {
  for (const View& v : views_)
    if (v.symbolic_offset())
      for (const UOp* u : Toposort(v.symbolic_offset()))
        if (u->op() == Op::kBind) return true;
  return false;
}

bool ShapeTracker::Unbind(ShapeTracker* out, std::map<std::string, int64_t>* vals) const {
  std::vector<View> views = views_;
  for (View& v : views) {
    if (!v.symbolic_offset()) continue;
    std::unordered_map<const UOp*, UOpRef> subst;
    for (const UOp* u : Toposort(v.symbolic_offset())) {
      if (u->op() != Op::kBind) continue;
      const std::string& name = u->src(0)->arg().Str();
      int64_t value = u->src(1)->const_value().index() == 0
                          ? std::get<int64_t>(u->src(1)->const_value())
                          : 0;
      auto [it, fresh] = vals->emplace(name, value);
      if (!fresh && it->second != value) return false;
      subst[u] = u->src(0);
    }
    if (!subst.empty()) v = v.WithSymbolicOffset(Substitute(v.symbolic_offset(), subst));
  }
  *out = ShapeTracker(std::move(views));
  return true;
}

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
