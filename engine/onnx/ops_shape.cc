// Shape and movement operators: Reshape, Flatten, Transpose, Squeeze,
// Unsqueeze, Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace,
// SpaceToDepth, Shape, Size, ConstantOfShape, Range, EyeLike, Trilu,
// Identity, Dropout.
#include <cmath>
#include <cstring>

#include "absl/strings/str_join.h"
#include "engine/onnx/channel_blocks.h"
#include "engine/onnx/derived_weights.h"
#include "engine/onnx/graph_builder.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/ops_common.h"
#include "engine/onnx/shape_util.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {
namespace {

absl::Status ReshapeOp(OpContext& ctx) {
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  std::vector<int64_t> target;
  if (ctx.opset() < 5) {
    RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
    target = ctx.Ints("shape");
  } else {
    RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
    ASSIGN_OR_RETURN(target, ctx.StaticInts(1));
  }
  ASSIGN_OR_RETURN(Shape s, ReshapeTarget(x.shape(), target, ctx.Int("allowzero", 0) != 0));
  ctx.Set(0, x.Reshape(s));
  return absl::OkStatus();
}

absl::Status FlattenOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Shape s, FlattenShape(x.shape(), ctx.Int("axis", 1)));
  ctx.Set(0, x.Reshape(s));
  return absl::OkStatus();
}

absl::Status TransposeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, TransposePerm(ctx, x.ndim()));
  ctx.Set(0, x.Permute(perm));
  return absl::OkStatus();
}

absl::Status SqueezeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, AxesArg(ctx, 1, 13));
  ASSIGN_OR_RETURN(Shape s, SqueezeShape(x.shape(), axes));
  ctx.Set(0, x.Reshape(s));
  return absl::OkStatus();
}

absl::Status UnsqueezeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, AxesArg(ctx, 1, 13));
  if (!axes) return Invalid("axes are required");
  ASSIGN_OR_RETURN(Shape s, UnsqueezeShape(x.shape(), *axes));
  ctx.Set(0, x.Reshape(s));
  return absl::OkStatus();
}

absl::Status ConcatOp(OpContext& ctx) {
  if (ctx.num_inputs() < 1) return Invalid("needs at least one input");
  if (!ctx.HasAttr("axis") && ctx.opset() >= 4) return Invalid("attribute 'axis' is required");
  std::vector<Tensor> ts;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ASSIGN_OR_RETURN(Tensor t, ctx.In(i));
    ts.push_back(t);
  }
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 1), ts[0].ndim()));
  // Along the channels of values in channel blocks: in blocks
  // (channel_blocks.h), when the result's readers keep them or every part
  // is blocked already.
  if (axis == 1 && ts[0].ndim() == 4) {
    std::vector<const OnnxValue*> raw;
    for (int i = 0; i < ctx.num_inputs(); ++i) raw.push_back(&ctx.Raw(i));
    const Scope* scope = ctx.builder()->current_scope();
    std::optional<OnnxValue> v = ConcatInBlocks(raw, [&] {
      return scope != nullptr && ChainContinues(ctx.node().output(0), *scope, -1);
    });
    if (v) {
      ctx.SetValue(0, std::move(*v));
      return absl::OkStatus();
    }
  }
  // Empty inputs contribute nothing (and may have a different rank in old models).
  std::vector<Tensor> parts;
  for (const Tensor& t : ts)
    if (t.numel() > 0 || t.ndim() == ts[0].ndim()) parts.push_back(t);
  if (parts.size() == 1) {
    ctx.Set(0, parts[0]);
    return absl::OkStatus();
  }
  ctx.Set(0, Tensor::Cat(parts, axis));
  return absl::OkStatus();
}

absl::Status SplitOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 0), x.ndim()));
  std::vector<int64_t> sizes;
  if (ctx.opset() >= 13 || ctx.num_inputs() > 1) {
    if (ctx.Has(1)) {
      ASSIGN_OR_RETURN(sizes, ctx.StaticInts(1));
    }
  } else {
    sizes = ctx.Ints("split");
  }
  ASSIGN_OR_RETURN(sizes, SplitSizes(x.dim(static_cast<int>(axis)), sizes, ctx.num_outputs(),
                                     ctx.Int("num_outputs", 0)));
  std::vector<Tensor> parts = x.Split(sizes, axis);
  for (int i = 0; i < ctx.num_outputs() && i < static_cast<int>(parts.size()); ++i)
    ctx.Set(i, parts[i]);
  return absl::OkStatus();
}

absl::Status SliceOp(OpContext& ctx) {
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(std::vector<Tensor::Slice> slices, SliceArgs(ctx, x.shape()));
  ctx.Set(0, x.Slices(slices));
  return absl::OkStatus();
}

absl::Status ExpandOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.StaticInts(1));
  RETURN_IF_ERROR(CheckedNumel(shape, kMaxTensorShapeElements, "the Expand shape").status());
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(x.shape(), shape));
  ctx.Set(0, x.Expand(out));
  return absl::OkStatus();
}

absl::Status TileOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> reps, ctx.StaticInts(1));
  if (static_cast<int>(reps.size()) != x.ndim())
    return Invalid(absl::StrCat("repeats has ", reps.size(), " values for rank ", x.ndim()));
  for (int64_t r : reps)
    if (r < 0) return Invalid("repeats must be non-negative");
  ctx.Set(0, x.Repeat(reps));
  return absl::OkStatus();
}

// reflect / edge / wrap padding of one axis by concatenating slices.
absl::StatusOr<Tensor> PadAxis(const Tensor& x, int64_t axis, int64_t before, int64_t after,
                               const std::string& mode) {
  int64_t n = x.dim(static_cast<int>(axis));
  auto slice = [&](int64_t lo, int64_t hi) {
    std::vector<Tensor::Slice> s(x.ndim());
    s[axis] = Tensor::Slice{lo, hi, 1};
    return x.Slices(s);
  };
  std::vector<Tensor> parts;
  if (mode == "reflect") {
    if (before >= n || after >= n)
      return Invalid(absl::StrCat("reflect padding ", std::max(before, after),
                                  " needs a dimension larger than ", n));
    if (before > 0) parts.push_back(slice(1, before + 1).Flip({axis}));
    parts.push_back(x);
    if (after > 0) parts.push_back(slice(n - 1 - after, n - 1).Flip({axis}));
  } else if (mode == "edge") {
    if (n == 0) return Invalid("edge padding of an empty dimension");
    Shape s = x.shape();
    if (before > 0) s[axis] = before, parts.push_back(slice(0, 1).Expand(s));
    parts.push_back(x);
    if (after > 0) s[axis] = after, parts.push_back(slice(n - 1, n).Expand(s));
  } else {  // wrap
    if (before > n || after > n) return Invalid("wrap padding larger than the dimension");
    if (before > 0) parts.push_back(slice(n - before, n));
    parts.push_back(x);
    if (after > 0) parts.push_back(slice(0, after));
  }
  return parts.size() == 1 ? parts[0] : Tensor::Cat(parts, axis);
}

absl::Status PadOp(OpContext& ctx) {
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  std::string mode = ctx.Str("mode", "constant");
  std::vector<int64_t> pads;
  double value = 0;
  std::optional<std::vector<int64_t>> axes;
  if (ctx.opset() < 11) {
    RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
    pads = ctx.opset() < 2 ? ctx.Ints("paddings") : ctx.Ints("pads");
    value = ctx.Float("value", 0.0f);
  } else {
    RETURN_IF_ERROR(ctx.CheckInputs(2, 4));
    ASSIGN_OR_RETURN(pads, ctx.StaticInts(1));
    if (ctx.Has(2)) {
      ASSIGN_OR_RETURN(HostTensor v, ctx.Static(2));
      if (v.numel() != 1) return Invalid("constant_value must be a scalar");
      value = v.GetDouble(0);
    }
    if (ctx.Has(3)) {
      ASSIGN_OR_RETURN(std::vector<int64_t> a, ctx.StaticInts(3));
      axes = a;
    }
  }
  int64_t rank = x.ndim();
  std::vector<int64_t> ax;
  if (axes) {
    ASSIGN_OR_RETURN(ax, NormAxes(*axes, rank));
  } else {
    for (int64_t i = 0; i < rank; ++i) ax.push_back(i);
  }
  if (pads.size() != 2 * ax.size())
    return Invalid(absl::StrCat("pads has ", pads.size(), " values, expected ", 2 * ax.size()));
  Pads p(rank, {0, 0});
  for (size_t i = 0; i < ax.size(); ++i) p[ax[i]] = {pads[i], pads[i + ax.size()]};
  if (mode == "constant") {
    // Of the spatial dims of channel blocks (channel_blocks.h): in blocks
    // (a padded lane takes the value too, which must then be finite).
    const std::optional<Tensor>& in = ctx.Raw(0).blocked;
    if (in && rank == 4 && p[0] == std::make_pair<int64_t, int64_t>(0, 0) &&
        p[1] == std::make_pair<int64_t, int64_t>(0, 0) && std::isfinite(value)) {
      Tensor y = in->Pad({{0, 0}, {0, 0}, p[2], p[3], {0, 0}}, value);
      if (y.ok()) {
        ctx.SetValue(0, BlockedValue(y, x.dim(1)));
        return absl::OkStatus();
      }
    }
    ctx.Set(0, x.Pad(p, value));
    return absl::OkStatus();
  }
  if (mode != "reflect" && mode != "edge" && mode != "wrap")
    return Unsupported(absl::StrCat("pad mode '", mode, "' is not supported"));
  // Negative pads crop first.
  Pads crop(rank, {0, 0});
  for (int64_t i = 0; i < rank; ++i)
    crop[i] = {std::min<int64_t>(p[i].first, 0), std::min<int64_t>(p[i].second, 0)};
  x = x.Pad(crop);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t b = std::max<int64_t>(p[i].first, 0), a = std::max<int64_t>(p[i].second, 0);
    if (b == 0 && a == 0) continue;
    ASSIGN_OR_RETURN(x, PadAxis(x, i, b, a, mode));
  }
  ctx.Set(0, x);
  return absl::OkStatus();
}

absl::Status DepthToSpaceOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  int64_t b = ctx.Int("blocksize", 0), bb = 0;
  if (x.ndim() != 4 || b <= 0 || __builtin_mul_overflow(b, b, &bb) || x.dim(1) % bb != 0)
    return Invalid("needs a 4-D input whose channels divide by blocksize^2");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), oc = c / (b * b);
  Tensor y;
  if (ctx.Str("mode", "DCR") == "CRD") {
    y = x.Reshape({n, oc, b, b, h, w}).Permute({0, 1, 4, 2, 5, 3});
  } else {
    y = x.Reshape({n, b, b, oc, h, w}).Permute({0, 3, 4, 1, 5, 2});
  }
  ctx.Set(0, y.Reshape({n, oc, h * b, w * b}));
  return absl::OkStatus();
}

absl::Status SpaceToDepthOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  int64_t b = ctx.Int("blocksize", 0);
  if (x.ndim() != 4 || b <= 0 || x.dim(2) % b != 0 || x.dim(3) % b != 0)
    return Invalid("needs a 4-D input whose spatial dims divide by blocksize");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  Tensor y = x.Reshape({n, c, h / b, b, w / b, b}).Permute({0, 3, 5, 1, 2, 4});
  ctx.Set(0, y.Reshape({n, c * b * b, h / b, w / b}));
  return absl::OkStatus();
}

absl::Status ShapeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  if (!ctx.Raw(0).is_tensor()) return Invalid("input is not a tensor");
  Shape s = ctx.ShapeOf(0);
  int64_t rank = static_cast<int64_t>(s.size());
  int64_t start = ctx.Int("start", 0), end = ctx.Int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  ctx.SetHost(0, HostTensor::Vector(std::vector<int64_t>(s.begin() + start, s.begin() + end)));
  return absl::OkStatus();
}

absl::Status SizeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ctx.SetHost(0, HostTensor::FromInt64s({kiln::Prod(ctx.ShapeOf(0))}, {}));
  return absl::OkStatus();
}

absl::Status ConstantOfShapeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.StaticInts(0));
  // Checked before anything is allocated: a big value stays a lazy constant.
  ASSIGN_OR_RETURN(int64_t numel,
                   CheckedNumel(shape, kMaxTensorShapeElements, "the ConstantOfShape output"));
  HostTensor value = HostTensor::FromDoubles({0}, {}, dtypes::kFloat32);
  if (const onnx::TensorProto* t = ctx.TensorAttr("value")) {
    ASSIGN_OR_RETURN(value, HostTensorFromProto(*t));
    if (value.numel() != 1) return Invalid("'value' must have one element");
  }
  if (numel <= kHostKeepLimit) {
    HostTensor out(value.dtype, shape);
    for (int64_t i = 0; i < out.numel(); ++i)
      std::memcpy(out.data.data() + i * value.dtype.ItemSize(), value.data.data(),
                  value.dtype.ItemSize());
    ctx.SetHost(0, std::move(out));
    return absl::OkStatus();
  }
  ConstValue v;
  if (value.dtype.IsFloat()) v = value.GetDouble(0);
  else v = value.GetInt(0);
  ctx.Set(0, Tensor::Full(ctx.engine(), shape, v, value.dtype, ctx.device()));
  return absl::OkStatus();
}

absl::Status RangeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(3, 3));
  ASSIGN_OR_RETURN(HostTensor start, ctx.Static(0));
  ASSIGN_OR_RETURN(HostTensor limit, ctx.Static(1));
  ASSIGN_OR_RETURN(HostTensor delta, ctx.Static(2));
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1)
    return Invalid("start, limit and delta must be scalars");
  ASSIGN_OR_RETURN(HostTensor out, RangeValues(start, limit, delta));
  if (out.numel() <= kHostKeepLimit) {
    ctx.SetHost(0, std::move(out));
  } else {
    ctx.Set(0, out.ToTensor(ctx.engine(), ctx.device()));
  }
  return absl::OkStatus();
}

// (rows, cols) bool mask of j - i >= k (upper) or j - i <= k (lower).
Tensor DiagMask(Engine* e, const std::string& dev, int64_t rows, int64_t cols, int64_t k,
                bool upper) {
  Tensor i = Tensor::Arange(e, 0, static_cast<double>(rows), 1, dtypes::kInt64, dev)
                 .Reshape({rows, 1});
  Tensor j = Tensor::Arange(e, 0, static_cast<double>(cols), 1, dtypes::kInt64, dev)
                 .Reshape({1, cols});
  Tensor d = j - i;
  Tensor kk = d.Scalar(static_cast<double>(k));
  return upper ? d.Ge(kk) : d.Le(kk);
}

absl::Status TriluOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  if (x.ndim() < 2) return Invalid("input must have rank >= 2");
  int64_t k = 0;
  if (ctx.Has(1)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> kv, ctx.StaticInts(1));
    if (kv.size() != 1) return Invalid("k must be a scalar");
    k = kv[0];
  }
  int64_t rows = x.dim(-2), cols = x.dim(-1);
  k = std::clamp<int64_t>(k, -rows - 1, cols + 1);
  Tensor mask = DiagMask(ctx.engine(), ctx.device(), rows, cols, k, ctx.Int("upper", 1) != 0);
  ctx.Set(0, Tensor::Where(mask, x, x.ZerosLike()));
  return absl::OkStatus();
}

absl::Status EyeLikeOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  Shape s = ctx.ShapeOf(0);
  if (s.size() != 2) return Invalid("input must be 2-D");
  DType t = ctx.Type(0);
  if (ctx.HasAttr("dtype")) {
    std::optional<DType> d = DTypeFromOnnx(static_cast<int>(ctx.Int("dtype", 1)));
    if (!d) return Unsupported("unsupported dtype");
    t = *d;
  }
  int64_t k = ctx.Int("k", 0);
  Tensor mask = DiagMask(ctx.engine(), ctx.device(), s[0], s[1], k, true)
                    .LogicalAnd(DiagMask(ctx.engine(), ctx.device(), s[0], s[1], k, false));
  ctx.Set(0, mask.Cast(t));
  return absl::OkStatus();
}

absl::Status IdentityOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  // The Identity of a model constant is that constant to the weights
  // derived from it (derived_weights.h).
  if (DerivedWeights* derived = ctx.builder()->derived())
    derived->AddAlias(ctx.node().output(0), ctx.node().input(0), &ctx.Raw(0));
  ctx.SetValue(0, ctx.Raw(0));
  return absl::OkStatus();
}

absl::Status DropoutOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 3));
  if (ctx.Has(2)) {
    ASSIGN_OR_RETURN(HostTensor training, ctx.Static(2));
    if (training.numel() == 1 && training.GetInt(0) != 0) {
      double ratio = 0.5;
      if (ctx.Has(1)) {
        ASSIGN_OR_RETURN(HostTensor r, ctx.Static(1));
        if (r.numel() != 1) return Invalid("ratio must be a scalar");
        ratio = r.GetDouble(0);
      }
      if (ratio != 0) return Unsupported("training-mode dropout (random) is not supported");
    }
  }
  // Attribute forms (opset < 12): is_test (< 7) selects inference; ratio only
  // matters in training.
  float ratio_attr = ctx.Float("ratio", 0.5f);
  if (ctx.opset() < 7 && ctx.Int("is_test", 0) == 0 && ratio_attr != 0)
    return Unsupported("training-mode dropout (random) is not supported");
  ctx.SetValue(0, ctx.Raw(0));
  if (ctx.Wants(1)) {
    Shape s = ctx.ShapeOf(0);
    DType mask_type = ctx.opset() >= 10 ? dtypes::kBool : ctx.Type(0);
    ctx.Set(1, Tensor::Full(ctx.engine(), s, int64_t{1}, mask_type, ctx.device()));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterShapeOps(OpRegistry* r) {
  r->Register("Reshape", ReshapeOp);
  r->Register("Flatten", FlattenOp);
  r->Register("Transpose", TransposeOp);
  r->Register("Squeeze", SqueezeOp);
  r->Register("Unsqueeze", UnsqueezeOp);
  r->Register("Concat", ConcatOp);
  r->Register("Split", SplitOp);
  r->Register("Slice", SliceOp);
  r->Register("Expand", ExpandOp);
  r->Register("Tile", TileOp);
  r->Register("Pad", PadOp);
  r->Register("DepthToSpace", DepthToSpaceOp);
  r->Register("SpaceToDepth", SpaceToDepthOp);
  r->Register("Shape", ShapeOp);
  r->Register("Size", SizeOp);
  r->Register("ConstantOfShape", ConstantOfShapeOp);
  r->Register("Range", RangeOp);
  r->Register("Trilu", TriluOp);
  r->Register("EyeLike", EyeLikeOp);
  r->Register("Identity", IdentityOp);
  r->Register("Dropout", DropoutOp);
}

}  // namespace kiln
