#include "engine/onnx/shape_util.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/onnx/ops_common.h"

namespace kiln {

absl::StatusOr<Shape> ReshapeTarget(const Shape& in, const std::vector<int64_t>& target,
                                    bool allowzero) {
  Shape out;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size())
        return Invalid(absl::StrCat("shape[", i, "] = 0 copies a dimension the input lacks"));
      d = in[i];
    }
    if (d == -1) {
      if (infer >= 0) return Invalid("shape has more than one -1");
      infer = static_cast<int>(i);
    } else if (d < 0) {
      return Invalid(absl::StrCat("shape has a negative dimension ", d));
    } else if (__builtin_mul_overflow(known, d, &known)) {
      return Invalid(absl::StrCat("cannot reshape (", absl::StrJoin(in, ","), ") to (",
                                  absl::StrJoin(target, ","), "): the shape is too large"));
    }
    out.push_back(d);
  }
  int64_t total = kiln::Prod(in);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      return Invalid(absl::StrCat("cannot reshape (", absl::StrJoin(in, ","), ") to (",
                                  absl::StrJoin(target, ","), ")"));
    out[infer] = total / known;
  } else if (known != total) {
    return Invalid(absl::StrCat("cannot reshape (", absl::StrJoin(in, ","), ") to (",
                                absl::StrJoin(target, ","), ")"));
  }
  return out;
}

absl::StatusOr<Shape> FlattenShape(const Shape& in, int64_t axis) {
  int64_t rank = static_cast<int64_t>(in.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank)
    return Invalid(absl::StrCat("axis is out of range for rank ", rank));
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < rank; ++i) (i < axis ? a : b) *= in[i];
  return Shape{a, b};
}

absl::StatusOr<std::vector<int64_t>> TransposePerm(const OpContext& ctx, int64_t rank) {
  std::vector<int64_t> perm = ctx.Ints("perm");
  if (!ctx.HasAttr("perm"))
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != rank)
    return Invalid(absl::StrCat("perm has ", perm.size(), " axes for rank ", rank));
  return NormAxes(perm, rank);
}

absl::StatusOr<Shape> SqueezeShape(const Shape& in,
                                   const std::optional<std::vector<int64_t>>& axes) {
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(rank, false);
  if (!axes || axes->empty()) {
    for (int64_t i = 0; i < rank; ++i) drop[i] = in[i] == 1;
  } else {
    ASSIGN_OR_RETURN(std::vector<int64_t> ax, NormAxes(*axes, rank));
    for (int64_t a : ax) {
      if (in[a] != 1)
        return Invalid(absl::StrCat("cannot squeeze axis ", a, " of size ", in[a]));
      drop[a] = true;
    }
  }
  Shape out;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i]) out.push_back(in[i]);
  return out;
}

absl::StatusOr<Shape> UnsqueezeShape(const Shape& in, const std::vector<int64_t>& axes) {
  int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  ASSIGN_OR_RETURN(std::vector<int64_t> ax, NormAxes(axes, rank));
  std::vector<bool> ins(rank, false);
  for (int64_t a : ax) ins[a] = true;
  Shape out;
  size_t j = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(ins[i] ? 1 : in[j++]);
  return out;
}

absl::StatusOr<std::vector<int64_t>> SplitSizes(int64_t dim, const std::vector<int64_t>& sizes,
                                                int outputs, int64_t num_outputs_attr) {
  if (!sizes.empty()) {
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) return Invalid("split sizes must be non-negative");
      if (__builtin_add_overflow(total, s, &total)) return Invalid("split sizes overflow");
    }
    if (total != dim)
      return Invalid(absl::StrCat("split sizes sum to ", total, ", the axis has ", dim));
    if (static_cast<int>(sizes.size()) != outputs)
      return Invalid(absl::StrCat(sizes.size(), " split sizes for ", outputs, " outputs"));
    return sizes;
  }
  if (num_outputs_attr > 0 && num_outputs_attr != outputs)
    return Invalid(absl::StrCat("num_outputs is ", num_outputs_attr, " for ", outputs, " outputs"));
  int64_t n = num_outputs_attr > 0 ? num_outputs_attr : outputs;
  if (n <= 0) return Invalid("no outputs");
  std::vector<int64_t> out;
  if (num_outputs_attr > 0) {
    int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) out.push_back(std::clamp<int64_t>(dim - i * chunk, 0, chunk));
  } else {
    if (dim % n != 0)
      return Invalid(absl::StrCat("axis of size ", dim, " does not split evenly into ", n));
    out.assign(n, dim / n);
  }
  return out;
}

absl::StatusOr<std::vector<Tensor::Slice>> SliceArgs(const OpContext& ctx, const Shape& shape) {
  int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
    starts = ctx.Ints("starts");
    ends = ctx.Ints("ends");
    axes = ctx.Ints("axes");
  } else {
    RETURN_IF_ERROR(ctx.CheckInputs(3, 5));
    ASSIGN_OR_RETURN(starts, ctx.StaticInts(1));
    ASSIGN_OR_RETURN(ends, ctx.StaticInts(2));
    if (ctx.Has(3)) {
      ASSIGN_OR_RETURN(axes, ctx.StaticInts(3));
    }
    if (ctx.Has(4)) {
      ASSIGN_OR_RETURN(steps, ctx.StaticInts(4));
    }
  }
  if (starts.size() != ends.size()) return Invalid("starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return Invalid("starts, ends, axes and steps differ in length");
  ASSIGN_OR_RETURN(axes, NormAxes(axes, rank));
  std::vector<Tensor::Slice> out(rank);
  for (size_t i = 0; i < axes.size(); ++i) {
    if (steps[i] == 0) return Invalid("slice step must not be 0");
    out[axes[i]] = Tensor::Slice{starts[i], ends[i], steps[i]};
  }
  return out;
}

absl::StatusOr<HostTensor> RangeValues(const HostTensor& start, const HostTensor& limit,
                                       const HostTensor& delta) {
  DType t = start.dtype;
  auto too_large = [](double n) {
    return absl::ResourceExhaustedError(absl::StrCat("a range of ", n,
                                                     " elements is too large (more than ",
                                                     kMaxHostElements, ")"));
  };
  if (t.IsFloat()) {
    double s = start.GetDouble(0), l = limit.GetDouble(0), d = delta.GetDouble(0);
    if (d == 0 || std::isnan(s) || std::isnan(l) || std::isnan(d))
      return Invalid("delta must be non-zero");
    double steps = std::ceil((l - s) / d);
    if (std::isnan(steps)) return Invalid("start, limit and delta give no range");
    if (steps > static_cast<double>(kMaxHostElements)) return too_large(steps);
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(steps));
    HostTensor out(t, {n});
    for (int64_t i = 0; i < n; ++i) out.SetDouble(i, s + static_cast<double>(i) * d);
    return out;
  }
  int64_t s = start.GetInt(0), l = limit.GetInt(0), d = delta.GetInt(0);
  if (d == 0) return Invalid("delta must be non-zero");
  // ceil((l - s) / d) in 128 bits: l - s overflows int64 for hostile values.
  __int128 diff = static_cast<__int128>(l) - s, dd = d;
  __int128 q = diff / dd;
  if (diff % dd != 0 && (diff > 0) == (dd > 0)) ++q;
  if (q > kMaxHostElements) return too_large(static_cast<double>(q));
  int64_t n = std::max<int64_t>(static_cast<int64_t>(std::max<__int128>(q, 0)), 0);
  HostTensor out(t, {n});
  for (int64_t i = 0; i < n; ++i) out.SetInt(i, s + i * d);
  return out;
}

}  // namespace kiln
