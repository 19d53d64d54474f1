#include "engine/shape/view.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/uop/symbolic.h"

namespace kiln {
namespace {

size_t Mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

View::Mask FullMask(const Shape& s) {
  View::Mask m;
  for (int64_t d : s) m.push_back({0, d});
  return m;
}

int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// A movement op's result keeps its source's symbolic offset.
View KeepSym(const UOpRef& sym, View v) { return sym ? v.WithSymbolicOffset(sym) : v; }

}  // namespace

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 0);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = shape[i] == 1 ? 0 : acc;
    acc *= shape[i];
  }
  return st;
}

int64_t Prod(const Shape& shape) {
  int64_t p = 1;
  for (int64_t d : shape) p *= d;
  return p;
}

View View::Create(Shape shape, std::vector<int64_t> strides, int64_t offset,
                  std::optional<Mask> mask) {
  View v;
  if (strides.empty()) strides = ContiguousStrides(shape);
  KILN_CHECK(strides.size() == shape.size(), "strides/shape rank mismatch");
  for (int64_t d : shape) KILN_CHECK(d >= 0, "negative dimension");
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 1) strides[i] = 0;
  if (mask) {
    KILN_CHECK(mask->size() == shape.size(), "mask/shape rank mismatch");
    for (size_t i = 0; i < shape.size(); ++i) {
      auto& [lo, hi] = (*mask)[i];
      lo = std::clamp<int64_t>(lo, 0, shape[i]);
      hi = std::clamp<int64_t>(hi, lo, shape[i]);
    }
    if (*mask == FullMask(shape)) mask.reset();
  }
  v.shape_ = std::move(shape);
  v.strides_ = std::move(strides);
  v.offset_ = offset;
  v.mask_ = std::move(mask);
  v.contiguous_ = v.offset_ == 0 && !v.mask_ && v.strides_ == ContiguousStrides(v.shape_);
  return v;
}

View View::AddSymbolicOffset(const UOpRef& term) const {
  return WithSymbolicOffset(sym_ ? sym_ + term : term);
}

View View::WithSymbolicOffset(UOpRef sym) const {
  View v = *this;
  v.sym_ = std::move(sym);
  v.contiguous_ = contiguous_ && !v.sym_;
  if (!v.sym_) v.contiguous_ = v.offset_ == 0 && !v.mask_ && v.strides_ == ContiguousStrides(v.shape_);
  return v;
}

View View::ShrinkAt(int axis, const UOpRef& start, int64_t size) const {
  std::vector<std::pair<int64_t, int64_t>> b;
  for (size_t i = 0; i < ndim(); ++i)
    b.push_back(static_cast<int>(i) == axis ? std::make_pair(int64_t{0}, size)
                                            : std::make_pair(int64_t{0}, shape_[i]));
  View v = Shrink(b);
  return strides_[axis] == 0 ? v : v.AddSymbolicOffset(start * strides_[axis]);
}

bool View::EmptyMask() const {
  if (!mask_) return false;
  for (const auto& [lo, hi] : *mask_)
    if (lo >= hi) return true;
  return false;
}

View View::Permute(const std::vector<int>& order) const {
  KILN_CHECK(order.size() == ndim(), "permute rank mismatch");
  Shape s;
  std::vector<int64_t> st;
  std::optional<Mask> m;
  if (mask_) m.emplace();
  std::vector<bool> seen(ndim(), false);
  for (int o : order) {
    KILN_CHECK(o >= 0 && static_cast<size_t>(o) < ndim() && !seen[o], "bad permutation");
    seen[o] = true;
    s.push_back(shape_[o]);
    st.push_back(strides_[o]);
    if (m) m->push_back((*mask_)[o]);
  }
  return KeepSym(sym_, Create(s, st, offset_, m));
}

View View::Expand(const Shape& ns) const {
  KILN_CHECK(ns.size() == ndim(), "expand rank mismatch");
  std::vector<int64_t> st = strides_;
  std::optional<Mask> m = mask_;
  for (size_t i = 0; i < ndim(); ++i) {
    if (ns[i] == shape_[i]) continue;
    KILN_CHECK(shape_[i] == 1, "can only expand size-1 dims");
    st[i] = 0;
    if (m) {
      bool any = (*m)[i].first < (*m)[i].second;
      (*m)[i] = {0, any ? ns[i] : 0};
    }
  }
  return KeepSym(sym_, Create(ns, st, offset_, m));
}

View View::Pad(const std::vector<std::pair<int64_t, int64_t>>& pads) const {
  KILN_CHECK(pads.size() == ndim(), "pad rank mismatch");
  Shape s = shape_;
  int64_t off = offset_;
  Mask m = mask_ ? *mask_ : FullMask(shape_);
  for (size_t i = 0; i < ndim(); ++i) {
    auto [b, a] = pads[i];
    KILN_CHECK(b >= 0 && a >= 0, "negative padding");
    s[i] += b + a;
    off -= b * strides_[i];
    m[i] = {m[i].first + b, m[i].second + b};
  }
  return KeepSym(sym_, Create(s, strides_, off, m));
}

View View::Shrink(const std::vector<std::pair<int64_t, int64_t>>& bounds) const {
  KILN_CHECK(bounds.size() == ndim(), "shrink rank mismatch");
  Shape s(ndim());
  int64_t off = offset_;
  std::optional<Mask> m;
  if (mask_) m.emplace();
  for (size_t i = 0; i < ndim(); ++i) {
    auto [lo, hi] = bounds[i];
    KILN_CHECK(0 <= lo && lo <= hi && hi <= shape_[i], "shrink out of range");
    s[i] = hi - lo;
    off += lo * strides_[i];
    if (m) {
      auto [mlo, mhi] = (*mask_)[i];
      m->push_back({std::max<int64_t>(mlo - lo, 0), std::min<int64_t>(mhi - lo, hi - lo)});
    }
  }
  return KeepSym(sym_, Create(s, strides_, off, m));
}

View View::Flip(const std::vector<bool>& axes) const {
  KILN_CHECK(axes.size() == ndim(), "flip rank mismatch");
  std::vector<int64_t> st = strides_;
  int64_t off = offset_;
  std::optional<Mask> m = mask_;
  for (size_t i = 0; i < ndim(); ++i) {
    if (!axes[i] || shape_[i] == 0) continue;
    off += (shape_[i] - 1) * strides_[i];
    st[i] = -strides_[i];
    if (m) (*m)[i] = {shape_[i] - (*m)[i].second, shape_[i] - (*m)[i].first};
  }
  return KeepSym(sym_, Create(shape_, st, off, m));
}

View View::Stride(const std::vector<int64_t>& steps) const {
  KILN_CHECK(steps.size() == ndim(), "stride rank mismatch");
  Shape s = shape_;
  std::vector<int64_t> st = strides_;
  std::optional<Mask> m = mask_;
  for (size_t i = 0; i < ndim(); ++i) {
    int64_t k = steps[i];
    KILN_CHECK(k > 0, "stride steps must be positive (flip first)");
    s[i] = CeilDiv(shape_[i], k);
    st[i] = strides_[i] * k;
    if (m) (*m)[i] = {CeilDiv((*m)[i].first, k), CeilDiv((*m)[i].second, k)};
  }
  return KeepSym(sym_, Create(s, st, offset_, m));
}

std::optional<View> View::Reshape(const Shape& ns) const {
  if (ns == shape_) return *this;
  KILN_CHECK(Prod(ns) == Prod(shape_), "reshape changes the number of elements");
  if (Prod(ns) == 0 || contiguous_) return Create(ns);
  if (EmptyMask()) {
    return Create(ns, std::vector<int64_t>(ns.size(), 0), 0, Mask(ns.size(), {0, 0}));
  }
  std::vector<size_t> od;  // old dims of size > 1
  for (size_t k = 0; k < ndim(); ++k)
    if (shape_[k] != 1) od.push_back(k);
  std::vector<int64_t> st(ns.size(), 0);
  Mask m = FullMask(ns);
  auto old_full = [&](size_t d) {
    return !mask_ || ((*mask_)[d].first == 0 && (*mask_)[d].second == shape_[d]);
  };
  size_t i = 0, j = 0;
  while (j < ns.size()) {
    if (ns[j] == 1) {
      ++j;
      continue;
    }
    size_t i0 = i, j0 = j;
    KILN_CHECK(i < od.size(), "reshape bookkeeping");
    int64_t pn = ns[j++], po = shape_[od[i++]];
    while (po != pn) {
      if (po < pn) {
        po *= shape_[od[i++]];
      } else {
        pn *= ns[j++];
      }
    }
    for (size_t k = i0; k + 1 < i; ++k)
      if (strides_[od[k]] != strides_[od[k + 1]] * shape_[od[k + 1]]) return std::nullopt;
    bool full = true;
    for (size_t k = i0; k < i; ++k) full &= old_full(od[k]);
    if (!full) {
      int non1 = 0;
      size_t target = j0;
      for (size_t jj = j0; jj < j; ++jj)
        if (ns[jj] != 1) ++non1, target = jj;
      if (i - i0 != 1 || non1 != 1) return std::nullopt;
      m[target] = (*mask_)[od[i0]];
    }
    int64_t acc = strides_[od[i - 1]];
    for (size_t jj = j; jj-- > j0;) {
      st[jj] = ns[jj] == 1 ? 0 : acc;
      acc *= ns[jj];
    }
  }
  return KeepSym(sym_,
                            Create(ns, st, offset_, mask_ ? std::optional<Mask>(m) : std::nullopt));
}

std::pair<UOpRef, UOpRef> View::ToIndex(const UOpList& idxs) const {
  KILN_CHECK(idxs.size() == ndim(), "index rank mismatch");
  DType it = idxs.empty() ? dtypes::kIndex : idxs[0]->dtype();
  UOpRef idx = UOp::ConstInt(offset_, it);
  if (sym_) idx = idx + (sym_->dtype() == it ? sym_ : Alu(Op::kCast, {sym_}));
  UOpRef valid = UOp::Const(dtypes::kBool, int64_t{1});
  for (size_t i = 0; i < ndim(); ++i) {
    if (shape_[i] != 1 && strides_[i] != 0) idx = idx + idxs[i] * strides_[i];
    if (!mask_) continue;
    auto [lo, hi] = (*mask_)[i];
    if (lo >= hi) return {UOp::ConstInt(0, it), UOp::Const(dtypes::kBool, int64_t{0})};
    // lo <= x  is written  -x < 1-lo  so the simplifier can fold it.
    if (lo > 0) valid = LogicalAnd(valid, Alu(Op::kCmpLt, {idxs[i] * -1, UOp::ConstInt(1 - lo, it)}));
    if (hi < shape_[i]) valid = LogicalAnd(valid, idxs[i] < hi);
  }
  return {idx, valid};
}

int64_t View::RealSize() const {
  if (Prod(shape_) == 0 || EmptyMask()) return 0;
  int64_t hi_idx = offset_, lo_idx = offset_;
  for (size_t i = 0; i < ndim(); ++i) {
    int64_t lo = mask_ ? (*mask_)[i].first : 0, hi = mask_ ? (*mask_)[i].second : shape_[i];
    int64_t a = lo * strides_[i], b = (hi - 1) * strides_[i];
    hi_idx += std::max(a, b);
    lo_idx += std::min(a, b);
  }
  (void)lo_idx;
  if (sym_) hi_idx += sym_->vmax();
  return hi_idx + 1;
}

size_t View::Hash() const {
  size_t h = 17;
  for (int64_t d : shape_) h = Mix(h, d);
  for (int64_t d : strides_) h = Mix(h, d);
  h = Mix(h, offset_);
  if (sym_) h = Mix(h, sym_->hash());
  if (mask_)
    for (auto [lo, hi] : *mask_) h = Mix(Mix(h, lo), hi);
  return h;
}

std::string View::ToString() const {
  std::string s = absl::StrCat("View(shape=(", absl::StrJoin(shape_, ","), "), strides=(",
                               absl::StrJoin(strides_, ","), "), offset=", offset_);
  if (sym_) absl::StrAppend(&s, "+", RenderExpr(sym_));
  if (mask_) {
    std::vector<std::string> parts;
    for (auto [lo, hi] : *mask_) parts.push_back(absl::StrCat("(", lo, ",", hi, ")"));
    absl::StrAppend(&s, ", mask=(", absl::StrJoin(parts, ","), ")");
  }
  return s + ")";
}

}  // namespace kiln
