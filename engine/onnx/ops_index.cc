// Indexing operators: Gather, GatherElements, GatherND, ScatterElements,
// Scatter, ScatterND, OneHot, TopK. Scatters are built from one-hot
// comparisons against an iota, selects and reductions; scatters of whole
// rows without a reduction (ScatterND, ScatterElements of an index repeated
// along the row) find each row's update and load it (ScatterRows).
#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

// 0..n-1 (int64) along `axis` of a rank-`rank` tensor of ones.
Tensor Iota(const OpContext& ctx, int64_t n, int64_t rank, int64_t axis) {
  Shape s(rank, 1);
  s[axis] = n;
  return Tensor::Arange(ctx.engine(), 0, static_cast<double>(n), 1, dtypes::kInt64, ctx.device())
      .Reshape(s);
}

// Constant indices that pick a run of consecutive entries (q, k, v =
// qkv[0], qkv[1], qkv[2] in an attention block): the run as a view of x,
// so kernels reading it load it like any other view. An indexed load there
// read one lane at a time (Swin-T's attention scores: 10 GFLOP/s). Returns
// false when the indices are not such a run.
absl::StatusOr<bool> GatherConstantRun(OpContext& ctx, const Tensor& x, int64_t axis) {
  const HostTensor* h = ctx.Host(1);
  if (h == nullptr || !h->dtype.IsInt() || h->numel() == 0) return false;
  const int64_t n = x.shape()[axis];
  int64_t first = 0;
  for (int64_t i = 0; i < h->numel(); ++i) {
    int64_t j = h->GetInt(i);
    if (j < -n || j >= n)
      return Invalid(absl::StrCat("index ", j, " is out of range for a dimension of ", n));
    if (j < 0) j += n;
    if (i == 0) first = j;
    if (j != first + i) return false;
  }
  Pads run;
  for (int64_t d : x.shape()) run.push_back({0, d});
  run[axis] = {first, first + h->numel()};
  Shape out(x.shape().begin(), x.shape().begin() + axis);
  out.insert(out.end(), h->shape.begin(), h->shape.end());
  out.insert(out.end(), x.shape().begin() + axis + 1, x.shape().end());
  ctx.Set(0, x.Shrink(run).Reshape(out));
  return true;
}

absl::Status GatherOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 0), x.ndim()));
  ASSIGN_OR_RETURN(bool run, GatherConstantRun(ctx, x, axis));
  if (run) return absl::OkStatus();
  ASSIGN_OR_RETURN(Tensor idx, ctx.In(1));
  ctx.Set(0, x.IndexSelect(axis, idx));
  return absl::OkStatus();
}

absl::Status GatherElementsOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor idx, ctx.In(1));
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 0), x.ndim()));
  ctx.Set(0, x.Gather(axis, idx));
  return absl::OkStatus();
}

absl::Status GatherNdOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor idx, ctx.In(1));
  int64_t b = ctx.Int("batch_dims", 0);
  if (idx.ndim() < 1) return Invalid("indices must have rank >= 1");
  int64_t k = idx.dim(-1);
  if (b < 0 || b >= std::min(x.ndim(), idx.ndim()) || b + k > x.ndim())
    return Invalid("batch_dims / index depth do not fit the data rank");
  const Shape& xs = x.shape();
  const Shape& is = idx.shape();
  int64_t nb = 1, nd = 1, nm = 1;
  for (int64_t i = 0; i < b; ++i) {
    if (xs[i] != is[i]) return Invalid("batch dims of data and indices differ");
    nb *= xs[i];
  }
  for (int64_t i = b; i < b + k; ++i) nd *= xs[i];
  for (int64_t i = b; i < idx.ndim() - 1; ++i) nm *= is[i];
  Shape rest(xs.begin() + b + k, xs.end());
  Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), rest.begin(), rest.end());
  if (nb * nm == 0) {  // no indices: an empty result
    ctx.Set(0, Tensor::Zeros(ctx.engine(), out, x.dtype(), ctx.device()));
    return absl::OkStatus();
  }
  if (nd == 0) return Invalid("indices address an empty dimension of the data");
  // Linear index into the flattened (batch, indexed dims) of the data.
  Tensor id = idx.Reshape({nb, nm, k}).Cast(dtypes::kInt64);
  Tensor lin = Tensor::Zeros(ctx.engine(), {nb, nm}, dtypes::kInt64, ctx.device());
  int64_t stride = nd;
  for (int64_t j = 0; j < k; ++j) {
    int64_t dim = xs[b + j];
    stride /= dim;
    Tensor col = WrapIndices(id.Slices({{}, {}, Tensor::Slice{j, j + 1, 1}}).Reshape({nb, nm}), dim);
    lin = lin + col * static_cast<double>(stride);
  }
  Tensor batch = Iota(ctx, nb, 2, 0) * static_cast<double>(nd);
  Shape flat_shape{nb * nd};
  flat_shape.insert(flat_shape.end(), rest.begin(), rest.end());
  Tensor r = x.Reshape(flat_shape).IndexSelect(0, (lin + batch).Reshape({nb * nm}));
  ctx.Set(0, r.Reshape(out));
  return absl::OkStatus();
}

// Combines `data` with the values `contrib` selected by `hit` (both in the
// data's shape) under an ONNX scatter reduction; `onehot` / `upd` keep the
// per-update axis `red_axis` for mul / max / min.
absl::StatusOr<Tensor> ScatterReduce(const std::string& reduction, const Tensor& data,
                                     const Tensor& onehot, const Tensor& upd, int64_t red_axis,
                                     const Pads& pads) {
  // No updates at all (empty indices): the data passes through unchanged.
  if (upd.numel() == 0) return data;
  Tensor zero = upd.ZerosLike();
  auto hit = onehot.Cast(dtypes::kInt32).Max({red_axis}).Cast(dtypes::kBool).Pad(pads);
  if (reduction == "none" || reduction == "add") {
    Tensor sum = Tensor::Where(onehot, upd, zero).Sum({red_axis}).Cast(data.dtype()).Pad(pads);
    if (reduction == "add") return data + sum;
    return Tensor::Where(hit, sum, data);
  }
  if (reduction == "mul") {
    Tensor prod = Tensor::Where(onehot, upd, upd.OnesLike()).Prod({red_axis}).Pad(pads, 1);
    return data * prod.Cast(data.dtype());
  }
  if (reduction == "max" || reduction == "min") {
    bool is_max = reduction == "max";
    double lo = upd.dtype().IsFloat() ? (is_max ? -INFINITY : INFINITY)
                                      : (is_max ? DTypeMin(upd.dtype()) : DTypeMax(upd.dtype()));
    Tensor fill = upd.Scalar(lo);
    Tensor sel = Tensor::Where(onehot, upd, fill);
    Tensor m = is_max ? sel.Max({red_axis}) : sel.Min({red_axis});
    m = m.Pad(pads).Cast(data.dtype());
    Tensor comb = is_max ? data.Maximum(m) : data.Minimum(m);
    return Tensor::Where(hit, comb, data);
  }
  return Invalid(absl::StrCat("unknown reduction '", reduction, "'"));
}

// Scatter of whole rows, reduction none: flat (p, nrest) data, update i
// (row i of upd (m, nrest)) lands at row lin[i] (int64, already wrapped;
// out-of-range rows are dropped). src[q], the last update writing row q or
// -1 (duplicates are undefined in ONNX; the last wins, as a sequential
// loop), takes O(m x p) compares; the rows are one indexed load, O(p x
// nrest), not a select over m x p x nrest.
Tensor ScatterRows(const OpContext& ctx, const Tensor& flat, const Tensor& lin, const Tensor& upd) {
  const int64_t m = lin.numel(), p = flat.dim(0), nrest = flat.dim(1);
  Tensor order = Iota(ctx, m, 2, 0);  // (m, 1)
  Tensor src = Tensor::Where(lin.Reshape({m, 1}).Eq(Iota(ctx, p, 2, 1)), order, order.Scalar(-1))
                   .Max({0})
                   .Contiguous();  // (p): computed once, not inside the row loads
  Tensor took = src.Ge(src.Scalar(0));
  Tensor rows = upd.Reshape({m, nrest}).IndexSelect(0, Tensor::Where(took, src, src.ZerosLike()));
  return Tensor::Where(took.Reshape({p, 1}), rows.Cast(flat.dtype()), flat);
}

absl::Status ScatterElementsOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(3, 3));
  ASSIGN_OR_RETURN(Tensor data, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor idx, ctx.In(1));
  ASSIGN_OR_RETURN(Tensor upd, ctx.In(2));
  int64_t r = data.ndim();
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 0), r));
  if (idx.ndim() != r || upd.shape() != idx.shape())
    return Invalid("indices and updates must have the data's rank and the same shape");
  int64_t n = data.dim(static_cast<int>(axis));
  Pads pads(r, {0, 0});
  for (int64_t d = 0; d < r; ++d) {
    if (d == axis) continue;
    if (idx.dim(static_cast<int>(d)) > data.dim(static_cast<int>(d)))
      return Invalid("indices are larger than the data outside the axis");
    pads[d] = {0, data.dim(static_cast<int>(d)) - idx.dim(static_cast<int>(d))};
  }
  // An index repeated along every other axis over whole rows (torchvision's
  // merge of RoiAlign levels: scatter(0, index.expand(m, C, H, W), rows))
  // moves whole rows: the row scatter.
  std::vector<int64_t> others;
  bool whole_rows = ctx.Str("reduction", "none") == "none";
  for (int64_t d = 0; d < r; ++d)
    if (d != axis) {
      others.push_back(d);
      whole_rows &= idx.dim(static_cast<int>(d)) == data.dim(static_cast<int>(d));
    }
  if (whole_rows && idx.numel() > 0 && idx.RepeatsAlong(others)) {
    const int64_t m = idx.dim(static_cast<int>(axis));
    Pads first(r, {0, 1});
    first[axis] = {0, m};
    Tensor lin = WrapIndices(idx.Shrink(first), n).Reshape({m});
    Tensor rows_in = data.Transpose(0, axis);  // rows along the axis
    Tensor upd_rows = upd.Transpose(0, axis);
    Shape moved = rows_in.shape();
    int64_t nrest = rows_in.numel() / std::max<int64_t>(n, 1);
    Tensor out = ScatterRows(ctx, rows_in.Reshape({n, nrest}), lin, upd_rows.Reshape({m, nrest}));
    ctx.Set(0, out.Reshape(moved).Transpose(0, axis));
    return absl::OkStatus();
  }
  // (..., u at axis, n at axis+1, ...): update u lands at position n.
  Tensor onehot = WrapIndices(idx, n).Unsqueeze(axis + 1).Eq(Iota(ctx, n, r + 1, axis + 1));
  Tensor u = upd.Unsqueeze(axis + 1);
  ASSIGN_OR_RETURN(Tensor out, ScatterReduce(ctx.Str("reduction", "none"), data, onehot, u,
                                             axis, pads));
  ctx.Set(0, out);
  return absl::OkStatus();
}

absl::Status ScatterNdOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(3, 3));
  ASSIGN_OR_RETURN(Tensor data, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor idx, ctx.In(1));
  ASSIGN_OR_RETURN(Tensor upd, ctx.In(2));
  if (idx.ndim() < 1) return Invalid("indices must have rank >= 1");
  int64_t k = idx.dim(-1);
  if (k > data.ndim()) return Invalid("index depth exceeds the data rank");
  const Shape& ds = data.shape();
  int64_t p = 1, m = 1;
  for (int64_t i = 0; i < k; ++i) p *= ds[i];
  for (int64_t i = 0; i + 1 < idx.ndim(); ++i) m *= idx.dim(static_cast<int>(i));
  Shape rest(ds.begin() + k, ds.end());
  Shape upd_want(idx.shape().begin(), idx.shape().end() - 1);
  upd_want.insert(upd_want.end(), rest.begin(), rest.end());
  if (upd.shape() != upd_want) return Invalid("updates shape does not match indices and data");
  if (m == 0) {  // no updates: the data passes through
    ctx.Set(0, data);
    return absl::OkStatus();
  }
  if (p == 0) return Invalid("indices address an empty dimension of the data");
  Tensor id = idx.Reshape({m, k}).Cast(dtypes::kInt64);
  Tensor lin = Tensor::Zeros(ctx.engine(), {m}, dtypes::kInt64, ctx.device());
  int64_t stride = p;
  for (int64_t j = 0; j < k; ++j) {
    stride /= ds[j];
    lin = lin + WrapIndices(id.Slices({{}, Tensor::Slice{j, j + 1, 1}}).Reshape({m}), ds[j]) *
                    static_cast<double>(stride);
  }
  int64_t nrest = kiln::Prod(rest);
  const std::string reduction = ctx.Str("reduction", "none");
  if (reduction == "none") {
    ctx.Set(0, ScatterRows(ctx, data.Reshape({p, nrest}), lin, upd.Reshape({m, nrest})).Reshape(ds));
    return absl::OkStatus();
  }
  // onehot (m, p, 1): update m lands at flat position p.
  Tensor onehot = lin.Reshape({m, 1, 1}).Eq(Iota(ctx, p, 3, 1));
  Tensor u = upd.Reshape({m, 1, nrest});
  Tensor flat = data.Reshape({p, nrest});
  ASSIGN_OR_RETURN(Tensor out, ScatterReduce(reduction, flat, onehot, u, 0, Pads(2, {0, 0})));
  ctx.Set(0, out.Reshape(ds));
  return absl::OkStatus();
}

absl::Status OneHotOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(3, 3));
  ASSIGN_OR_RETURN(Tensor idx, ctx.In(0));
  ASSIGN_OR_RETURN(HostTensor depth_h, ctx.Static(1));
  ASSIGN_OR_RETURN(Tensor values, ctx.In(2));
  if (depth_h.numel() != 1) return Invalid("depth must be a scalar");
  int64_t depth = static_cast<int64_t>(depth_h.GetDouble(0));
  if (depth <= 0 || depth > (int64_t{1} << 26)) return Invalid("depth must be in [1, 2^26]");
  if (values.numel() != 2) return Invalid("values must have two elements (off, on)");
  int64_t r = idx.ndim() + 1;
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", -1), r));
  Tensor i = idx.dtype().IsFloat() ? idx.Trunc().Cast(dtypes::kInt64) : idx.Cast(dtypes::kInt64);
  i = Tensor::Where(i.Lt(i.Scalar(0)), i + static_cast<double>(depth), i);
  Tensor hot = i.Unsqueeze(axis).Eq(Iota(ctx, depth, r, axis));
  Tensor v = values.Reshape({2});
  Tensor off = v.Shrink({{0, 1}}).Reshape({}), on = v.Shrink({{1, 2}}).Reshape({});
  ctx.Set(0, Tensor::Where(hot, on, off));
  return absl::OkStatus();
}

// TopK by ranks: rank_i = #{j : x_j before x_i}; output k takes rank k.
absl::Status TopKOp(OpContext& ctx) {
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  int64_t k;
  if (ctx.opset() < 10) {
    RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
    k = ctx.Int("k", -1);
  } else {
    RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
    ASSIGN_OR_RETURN(std::vector<int64_t> kv, ctx.StaticInts(1));
    if (kv.size() != 1) return Invalid("K must have one element");
    k = kv[0];
  }
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", -1), x.ndim()));
  int64_t n = x.dim(static_cast<int>(axis));
  if (k < 0 || k > n) return Invalid(absl::StrCat("K = ", k, " is out of range for ", n));
  bool largest = ctx.Int("largest", 1) != 0;
  (void)ctx.Int("sorted", 1);  // the outputs are always sorted, which sorted=0 allows
  Tensor xt = x.Transpose(axis, -1);  // (..., n)
  int64_t r = xt.ndim();
  Tensor xi = xt.Unsqueeze(-1), xj = xt.Unsqueeze(-2);  // (..., n, 1), (..., 1, n)
  Tensor ii = Iota(ctx, n, r + 1, r - 1), jj = Iota(ctx, n, r + 1, r);
  Tensor better = largest ? xj.Gt(xi) : xj.Lt(xi);
  Tensor before = better.LogicalOr(xj.Eq(xi).LogicalAnd(jj.Lt(ii)));
  Tensor rank = before.Cast(dtypes::kInt32).Sum({-1});  // (..., n)
  Tensor kk = Iota(ctx, k, r + 1, r - 1).Cast(dtypes::kInt32);  // (..., k, 1)
  Tensor sel = rank.Unsqueeze(-2).Eq(kk);  // (..., k, n)
  Tensor vals = Tensor::Where(sel, xt.Unsqueeze(-2), xt.Unsqueeze(-2).ZerosLike()).Sum({-1});
  Tensor idxs = Tensor::Where(sel, jj, jj.ZerosLike()).Sum({-1});
  ctx.Set(0, vals.Cast(x.dtype()).Transpose(axis, -1));
  ctx.Set(1, idxs.Cast(dtypes::kInt64).Transpose(axis, -1));
  return absl::OkStatus();
}

}  // namespace

void RegisterIndexOps(OpRegistry* r) {
  r->Register("Gather", GatherOp);
  r->Register("GatherElements", GatherElementsOp);
  r->Register("GatherND", GatherNdOp);
  r->Register("ScatterElements", ScatterElementsOp);
  r->Register("Scatter", ScatterElementsOp);
  r->Register("ScatterND", ScatterNdOp);
  r->Register("OneHot", OneHotOp);
  r->Register("TopK", TopKOp);
}

}  // namespace kiln
