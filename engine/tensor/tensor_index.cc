// Joining, splitting, tiling and indexing ops built from the primitives:
// Cat / Stack (padded views merged with Where), Split (shrinks), Repeat
// (expand + reshape), Gather / IndexSelect (one-hot compare against an iota,
// select, sum) and Cumsum (sliding windows + sum).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/tensor/tensor.h"
#include "engine/tensor/tensor_internal.h"

namespace kiln {
namespace {

// Normalizes `axis` for rank `n`; false if out of range.
bool NormAxis(int64_t* axis, int64_t n) {
  if (*axis < 0) *axis += n;
  return *axis >= 0 && *axis < n;
}

// Negative indices count from the end of a dim of size n. Narrow index types
// compute in int32.
Tensor WrapIndex(const Tensor& index, int64_t n) {
  Tensor idx = index.dtype().ItemSize() == 8 ? index : index.Cast(dtypes::kInt32);
  if (idx.dtype().IsUnsigned()) return idx;
  Tensor z = idx.Const(int64_t{0}, idx.dtype());
  return Tensor::Where(idx.Lt(z), idx + static_cast<double>(n), idx);
}

}  // namespace

Tensor Tensor::Cat(const std::vector<Tensor>& ts, int64_t axis) {
  if (ts.empty()) return Error(absl::InvalidArgumentError("cat: no tensors"));
  for (const Tensor& t : ts)
    if (!t.ok()) return t;
  const Tensor& first = ts[0];
  int64_t rank = first.ndim();
  if (!NormAxis(&axis, rank))
    return Fail(first, absl::StrCat("cat: axis out of range for shape ", ShapeStr(first.shape())));
  DType dt = first.dtype();
  int64_t total = 0;
  for (const Tensor& t : ts) {
    bool match = t.ndim() == rank;
    for (int64_t i = 0; match && i < rank; ++i)
      match = i == axis || t.shape()[i] == first.shape()[i];
    if (!match)
      return Fail(first, absl::StrCat("cat: shapes ", ShapeStr(first.shape()), " and ",
                                      ShapeStr(t.shape()), " differ outside axis ", axis));
    if (t.engine() != first.engine() || t.device() != first.device())
      return Fail(first, "cat: tensors are on different devices / engines");
    dt = PromoteTypes(dt, t.dtype());
    if (__builtin_add_overflow(total, t.shape()[axis], &total))
      return TensorInternal::ErrorLike(first, absl::ResourceExhaustedError("cat: too large"));
  }
  Shape out = first.shape();
  out[axis] = total;
  std::vector<const Tensor*> parts;
  for (const Tensor& t : ts)
    if (t.numel() > 0) parts.push_back(&t);
  if (parts.empty()) return Zeros(first.engine(), out, dt, first.device());
  Tensor r;
  int64_t offset = 0;
  for (const Tensor& t : ts) {
    int64_t n = t.shape()[axis];
    if (t.numel() == 0) {
      offset += n;
      continue;
    }
    Pads p(rank, {0, 0});
    p[axis] = {offset, total - offset - n};
    Tensor placed = t.Cast(dt).Pad(p);
    if (parts.size() == 1 || &t == parts[0]) {
      r = placed;
    } else {
      Tensor inside = Full(t.engine(), t.shape(), int64_t{1}, dtypes::kBool, t.device()).Pad(p);
      r = Where(inside, placed, r);
    }
    offset += n;
  }
  return r;
}

Tensor Tensor::Stack(const std::vector<Tensor>& ts, int64_t axis) {
  if (ts.empty()) return Error(absl::InvalidArgumentError("stack: no tensors"));
  for (const Tensor& t : ts)
    if (!t.ok()) return t;
  int64_t rank = ts[0].ndim() + 1;
  if (!NormAxis(&axis, rank)) return Fail(ts[0], "stack: axis out of range");
  std::vector<Tensor> u;
  for (const Tensor& t : ts) {
    if (t.shape() != ts[0].shape())
      return Fail(ts[0], absl::StrCat("stack: shapes ", ShapeStr(ts[0].shape()), " and ",
                                      ShapeStr(t.shape()), " differ"));
    u.push_back(t.Unsqueeze(axis));
  }
  return Cat(u, axis);
}

std::vector<Tensor> Tensor::Split(const std::vector<int64_t>& sizes, int64_t axis) const {
  size_t n_out = std::max<size_t>(sizes.size(), 1);
  if (!ok()) return std::vector<Tensor>(n_out, *this);
  auto fail = [&](const std::string& msg) { return std::vector<Tensor>(n_out, Fail(*this, msg)); };
  if (!NormAxis(&axis, ndim()))
    return fail(absl::StrCat("split: axis out of range for shape ", ShapeStr(shape())));
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s < 0) return fail("split: negative size");
    if (__builtin_add_overflow(sum, s, &sum)) return fail("split: sizes overflow");
  }
  if (sizes.empty() || sum != shape()[axis])
    return fail(absl::StrCat("split: sizes [", absl::StrJoin(sizes, ","), "] do not add up to ",
                             shape()[axis], " (shape ", ShapeStr(shape()), ", axis ", axis, ")"));
  std::vector<Tensor> out;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    Pads b;
    for (int i = 0; i < ndim(); ++i) b.push_back({0, shape()[i]});
    b[axis] = {offset, offset + s};
    out.push_back(Shrink(b));
    offset += s;
  }
  return out;
}

Tensor Tensor::ChunkBatch(int64_t per, const std::function<Tensor(const Tensor&)>& f) const {
  if (!ok()) return *this;
  const int64_t n = ndim() > 0 ? shape()[0] : 1;
  // More than this many slices (a huge or prime batch): one, unsliced (the
  // graph would grow with the batch).
  constexpr int64_t kMaxSlices = 64;
  if (per >= n || n <= 1) return f(*this);
  // The largest divisor of n up to `per` is n over the fewest slices that
  // divide n and keep slices within `per`: at most kMaxSlices tries.
  int64_t chunk = 0;
  for (int64_t s = (n + std::max<int64_t>(per, 1) - 1) / std::max<int64_t>(per, 1);
       s <= kMaxSlices && chunk == 0; ++s)
    if (n % s == 0) chunk = n / s;
  if (chunk == 0) return f(*this);
  std::vector<Tensor> parts;
  for (const Tensor& slice : Split(std::vector<int64_t>(n / chunk, chunk), 0)) {
    parts.push_back(f(slice));
    if (!parts.back().ok()) return parts.back();
  }
  return Cat(parts, 0);
}

Tensor Tensor::Repeat(const std::vector<int64_t>& repeats_in) const {
  if (!ok()) return *this;
  for (int64_t r : repeats_in)
    if (r < 0)
      return Fail(*this, absl::StrCat("repeat: negative repeat count [",
                                      absl::StrJoin(repeats_in, ","), "]"));
  // numpy tile: the shorter of shape / repeats is padded with leading 1s.
  size_t n = std::max<size_t>(repeats_in.size(), ndim());
  std::vector<int64_t> reps(n - repeats_in.size(), 1);
  reps.insert(reps.end(), repeats_in.begin(), repeats_in.end());
  Shape s(n - ndim(), 1);
  s.insert(s.end(), shape().begin(), shape().end());
  Shape unit, expanded, out;
  for (size_t i = 0; i < n; ++i) {
    unit.push_back(1);
    unit.push_back(s[i]);
    expanded.push_back(reps[i]);
    expanded.push_back(s[i]);
    int64_t o;
    if (__builtin_mul_overflow(reps[i], s[i], &o))
      return TensorInternal::ErrorLike(
          *this, absl::ResourceExhaustedError(absl::StrCat(
                     "repeat: ", ShapeStr(shape()), " by [", absl::StrJoin(repeats_in, ","),
                     "] is too large")));
    out.push_back(o);
  }
  if (absl::Status bad = CheckShape(expanded, "repeat"); !bad.ok())
    return TensorInternal::ErrorLike(*this, bad);
  return Reshape(unit).Expand(expanded).Reshape(out);
}

Tensor Tensor::Gather(int64_t axis, const Tensor& index) const {
  if (!ok()) return *this;
  if (!index.ok()) return index;
  if (!index.dtype().IsInt())
    return Fail(*this, absl::StrCat("gather: index dtype ", index.dtype().Name(),
                                    " is not an integer type"));
  if (!NormAxis(&axis, ndim()) || index.ndim() != ndim())
    return Fail(*this, absl::StrCat("gather: index ", ShapeStr(index.shape()), " for input ",
                                    ShapeStr(shape()), " along axis ", axis));
  // Non-axis dims of the index may be smaller than the input's.
  Pads b;
  for (int i = 0; i < ndim(); ++i) {
    if (i != axis && index.shape()[i] > shape()[i])
      return Fail(*this,
                  absl::StrCat("gather: index ", ShapeStr(index.shape()), " is larger than input ",
                               ShapeStr(shape()), " outside axis ", axis));
    b.push_back({0, i == axis ? shape()[i] : index.shape()[i]});
  }
  // An indexed load of the input (shrunk to the index outside the axis).
  std::vector<int64_t> dims(ndim());
  for (int i = 0; i < ndim(); ++i) dims[i] = i;
  return GatherLoad(Shrink(b), axis, WrapIndex(index, shape()[axis]), dims);
}

Tensor Tensor::IndexSelect(int64_t axis, const Tensor& index) const {
  if (!ok()) return *this;
  if (!index.ok()) return index;
  if (!index.dtype().IsInt())
    return Fail(*this, absl::StrCat("index_select: index dtype ", index.dtype().Name(),
                                    " is not an integer type"));
  if (!NormAxis(&axis, ndim()))
    return Fail(*this,
                absl::StrCat("index_select: axis out of range for shape ", ShapeStr(shape())));
  // out (pre..., index..., post...) = x[pre, index[j], post]: an indexed
  // load with the index broadcast over pre and post.
  Shape out(shape().begin(), shape().begin() + axis);
  out.insert(out.end(), index.shape().begin(), index.shape().end());
  out.insert(out.end(), shape().begin() + axis + 1, shape().end());
  const int64_t k = index.ndim();
  Shape is(axis, 1);
  is.insert(is.end(), index.shape().begin(), index.shape().end());
  is.resize(out.size(), 1);
  Tensor idx = WrapIndex(index, shape()[axis]).Reshape(is).Expand(out);
  std::vector<int64_t> dims(ndim());
  for (int64_t d = 0; d < ndim(); ++d) dims[d] = d < axis ? d : d + k - 1;
  return GatherLoad(*this, axis, idx, dims);
}

namespace {
// Inclusive prefix sums along the last dim. Short rows: sliding windows of
// the whole row (n^2 adds). Long rows: blocks of kBlock summed that way, plus
// the exclusive prefix sums of the block totals (recursively).
Tensor CumsumLast(const Tensor& x) {
  constexpr int64_t kBlock = 64;
  int64_t n = x.shape().back();
  if (n <= kBlock) return x.Pool({n}, {1}, {1}, {{n - 1, 0}}).Sum({-1});
  int64_t m = (n + kBlock - 1) / kBlock;
  Pads grow(x.ndim(), {0, 0});
  grow.back() = {0, m * kBlock - n};
  Shape blocks(x.shape().begin(), x.shape().end() - 1);
  blocks.insert(blocks.end(), {m, kBlock});
  Tensor xb = x.Pad(grow).Reshape(blocks);  // (..., m, B)
  Tensor inner = CumsumLast(xb);
  Tensor totals = xb.Sum({-1});  // (..., m)
  Pads shift(totals.ndim(), {0, 0});
  shift.back() = {1, -1};
  Tensor offsets = CumsumLast(totals.Pad(shift));  // exclusive prefix sums
  Tensor r = inner + offsets.Unsqueeze(-1);
  Shape flat(x.shape().begin(), x.shape().end() - 1);
  flat.push_back(m * kBlock);
  Pads cut;
  for (int64_t d : flat) cut.push_back({0, d});
  cut.back() = {0, n};
  return r.Reshape(flat).Shrink(cut);
}
}  // namespace

Tensor Tensor::Cumsum(int64_t axis) const {
  if (!ok()) return *this;
  if (!NormAxis(&axis, ndim()))
    return Fail(*this, absl::StrCat("cumsum: axis out of range for shape ", ShapeStr(shape())));
  if (numel() == 0) return dtype().IsBool() ? Cast(dtypes::kInt32) : *this;
  return CumsumLast(Transpose(axis, -1)).Transpose(axis, -1);
}

}  // namespace kiln
