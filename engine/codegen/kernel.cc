#include "engine/codegen/kernel.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"
#include "engine/uop/symbolic.h"

namespace kiln {

std::string Opt::ToString() const {
  const char* name = op == OptOp::kUpcast   ? "UPCAST"
                     : op == OptOp::kUnroll ? "UNROLL"
                     : op == OptOp::kLocal  ? "LOCAL"
                                            : "GROUP";
  return absl::StrCat(name, "(", axis, ",", amount, vector ? ",vec" : "", ")");
}

namespace {
bool IsMem(const UOp& u) {
  return u.op() == Op::kLoad || u.op() == Op::kStore || u.op() == Op::kValid;
}
}  // namespace

absl::StatusOr<Kernel> Kernel::Create(const UOpRef& ast, const RendererOptions& opts) {
  if (ast->op() != Op::kSink || ast->src().size() != 1 || ast->src(0)->op() != Op::kStore)
    return absl::InvalidArgumentError("kernel AST must be a SINK of one STORE");
  Kernel k;
  k.ast_ = ast;
  k.opts_ = opts;
  for (const UOp* u : Toposort(ast)) {
    if (IsMem(*u)) {
      k.mems_.push_back(u);
      k.sts_.emplace(u, *kiln::StOf(*u));
    }
    if (u->op() == Op::kReduceAxis) {
      if (k.reduce_) return absl::InvalidArgumentError("kernel has more than one reduce");
      k.reduce_ = u;
    }
  }
  const Shape& out = k.sts_.at(ast->src(0).get()).shape();
  k.full_shape_ = out;
  if (k.reduce_) {
    for (const UOp* u : Toposort(k.reduce_->src(0)))
      if (IsMem(*u)) {
        k.full_shape_ = k.sts_.at(u).shape();
        break;
      }
  }
  for (const auto& [u, st] : k.sts_) {
    if (st.ndim() != out.size() || (st.shape() != out && st.shape() != k.full_shape_))
      return absl::InvalidArgumentError(absl::StrCat("kernel views disagree: ", st.ToString()));
  }
  // Non-reduce axes first, reduce axes last.
  std::vector<int> order;
  for (int i = 0; i < k.ndim(); ++i)
    if (k.full_shape_[i] == out[i]) order.push_back(i);
  k.first_reduce_ = static_cast<int>(order.size());
  for (int i = 0; i < k.ndim(); ++i)
    if (k.full_shape_[i] != out[i]) order.push_back(i);
  k.PermuteAll(order);
  k.DropUnitAxes();
  k.MergeAdjacent();
  return k;
}

const Shape& Kernel::output_shape() const { return sts_.at(ast_->src(0).get()).shape(); }

bool Kernel::IsReduceAxis(int axis) const {
  return full_shape_[axis] != output_shape()[axis];
}

void Kernel::PermuteAll(const std::vector<int>& order) {
  stride_cache_.clear();
  for (auto& [u, st] : sts_) st = st.Permute(order);
  Shape f;
  for (int o : order) f.push_back(full_shape_[o]);
  full_shape_ = f;
}

void Kernel::ReshapeAll(const std::vector<Shape>& shapes) {
  // shapes[0]: new full shape, shapes[1]: new output shape.
  const Shape old_full = full_shape_;
  stride_cache_.clear();
  for (auto& [u, st] : sts_) st = st.Reshape(st.shape() == old_full ? shapes[0] : shapes[1]);
  full_shape_ = shapes[0];
}

void Kernel::DropUnitAxes() {
  Shape f, o;
  const Shape& out = output_shape();
  int fr = 0;
  for (int i = 0; i < ndim(); ++i) {
    if (full_shape_[i] == 1) continue;
    f.push_back(full_shape_[i]);
    o.push_back(out[i]);
    if (i < first_reduce_) ++fr;
  }
  if (f.size() == full_shape_.size()) return;
  ReshapeAll({f, o});
  first_reduce_ = fr;
}

bool Kernel::Strides(const UOp* mem, std::vector<int64_t>* strides) const {
  auto hit = stride_cache_.find(mem);
  if (hit != stride_cache_.end()) {
    *strides = hit->second;
    return true;
  }
  // A mask only gates elements (masked loads / stores); the strides still
  // tell how the view walks the buffer.
  const ShapeTracker& st = sts_.at(mem);
  std::vector<int64_t> result(st.ndim(), 0);
  if (st.views().size() == 1) {
    result = st.view().strides();
  } else {
    // Several views (a masked axis split for vectors, heads split out of a
    // feature axis): the strides of the composed index along the axes where
    // it is affine, kNotAffine along the others.
    UOpList vars;
    for (size_t i = 0; i < st.ndim(); ++i)
      vars.push_back(UOp::Variable(absl::StrCat("idx", i), 0, std::max<int64_t>(st.shape()[i] - 1, 0)));
    UOpRef idx = st.ToIndex(vars).first;
    for (size_t i = 0; i < st.ndim(); ++i) {
      if (st.shape()[i] == 1) continue;
      UOpRef d = Simplify(Substitute(idx, {{vars[i].get(), vars[i] + 1}}) - idx);
      result[i] = d->IsConst() ? std::get<int64_t>(d->const_value()) : kNotAffine;
    }
  }
  // A gather's load also moves by the data its offset reads: not affine
  // along every axis along which those reads move.
  if (mem->op() == Op::kLoad && mem->src().size() > 1) {
    for (const UOp* u : Toposort(mem->src(1))) {
      if (!IsMem(*u)) continue;
      std::vector<int64_t> inner;
      Strides(u, &inner);
      for (size_t i = 0; i < result.size() && i < inner.size(); ++i)
        if (inner[i] != 0) result[i] = kNotAffine;
    }
  }
  *strides = result;
  stride_cache_.emplace(mem, std::move(result));
  return true;
}

void Kernel::MergeAdjacent() {
  for (int i = ndim() - 2; i >= 0; --i) {
    if ((i < first_reduce_) != (i + 1 < first_reduce_)) continue;
    bool ok = true;
    for (const UOp* m : mems_) {
      const ShapeTracker& st = sts_.at(m);
      if (st.views().size() != 1) {
        ok = false;
        break;
      }
      const View& v = st.view();
      const auto& s = v.shape();
      if (v.mask() && ((*v.mask())[i] != std::make_pair<int64_t, int64_t>(0, int64_t(s[i])) ||
                       (*v.mask())[i + 1] != std::make_pair<int64_t, int64_t>(0, int64_t(s[i + 1])))) {
        ok = false;
        break;
      }
      if (s[i] == 1 && s[i + 1] == 1) continue;
      if (v.strides()[i] != v.strides()[i + 1] * s[i + 1]) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    Shape f = full_shape_, o = output_shape();
    f[i] *= f[i + 1];
    o[i] *= o[i + 1];
    f.erase(f.begin() + i + 1);
    o.erase(o.begin() + i + 1);
    ReshapeAll({f, o});
    if (i + 1 < first_reduce_) --first_reduce_;
  }
}

void Kernel::SplitTo(int axis, int64_t amount, int dest) {
  Shape f = full_shape_, o = output_shape();
  int64_t fs = f[axis], os = o[axis];
  f[axis] = fs / amount;
  f.insert(f.begin() + axis + 1, amount);
  o[axis] = os == 1 ? 1 : os / amount;
  o.insert(o.begin() + axis + 1, os == 1 ? 1 : amount);
  ReshapeAll({f, o});
  std::vector<int> order;
  for (int i = 0; i < ndim(); ++i)
    if (i != axis + 1) order.push_back(i);
  order.insert(order.begin() + dest, axis + 1);
  PermuteAll(order);
}

void Kernel::SplitAll(int axis, int64_t amount) {
  SplitTo(axis, amount, ndim());
  ++upcasted_;
}

absl::Status Kernel::PadGlobal(int axis, int64_t size) {
  if (axis < 0 || axis >= first_local())
    return absl::InvalidArgumentError(absl::StrCat("PadGlobal: axis ", axis, " is not global"));
  if (size < full_shape_[axis])
    return absl::InvalidArgumentError(absl::StrCat("PadGlobal: ", size, " < ", full_shape_[axis]));
  if (size == full_shape_[axis]) return absl::OkStatus();
  GrowAxis(axis, size);
  return absl::OkStatus();
}

void Kernel::GrowAxis(int axis, int64_t size) {
  std::vector<std::pair<int64_t, int64_t>> pads(ndim(), {0, 0});
  pads[axis] = {0, size - full_shape_[axis]};
  stride_cache_.clear();
  for (auto& [u, st] : sts_) {
    if (st.shape()[axis] != full_shape_[axis]) continue;  // output-shaped: size 1 there
    // A view that does not move along the axis (a broadcast operand) reads
    // the same in-bounds element in the new region: no mask is needed there,
    // and its loads stay plain broadcasts.
    st = st.view().strides()[axis] == 0 ? st.ExtendBroadcast(axis, size) : st.Pad(pads);
  }
  full_shape_[axis] = size;
}

absl::Status Kernel::PadReduce(int axis, int64_t size) {
  if (!reduce_ || axis < first_reduce_ + group_dims_ || axis >= first_upcast())
    return absl::InvalidArgumentError(absl::StrCat("PadReduce: axis ", axis, " is not a reduce axis"));
  if (size < full_shape_[axis])
    return absl::InvalidArgumentError(absl::StrCat("PadReduce: ", size, " < ", full_shape_[axis]));
  if (size == full_shape_[axis]) return absl::OkStatus();
  // The new positions must not change the result: the reduce reads
  // where(valid, x, identity), valid being false there.
  const Op rop = ReduceOpOf(*reduce_);
  const DType dt = reduce_->dtype();
  UOpRef identity;
  if (rop == Op::kAdd) identity = UOp::Const(dt, dt.IsFloat() ? ConstValue{0.0} : ConstValue{int64_t{0}});
  else if (rop == Op::kMul) identity = UOp::Const(dt, dt.IsFloat() ? ConstValue{1.0} : ConstValue{int64_t{1}});
  else if (rop == Op::kMax && dt.IsFloat()) identity = UOp::Const(dt, -std::numeric_limits<double>::infinity());
  else if (rop == Op::kMax) identity = UOp::Const(dt, static_cast<int64_t>(DTypeMin(dt)));
  else return absl::InvalidArgumentError("PadReduce: no identity for this reduce");
  UOpRef valid = UOp::Make(Op::kValid, dtypes::kBool, {}, Arg(StArg(ShapeTracker::FromShape(full_shape_))));
  const UOpRef& x = reduce_->src(0);
  UOpRef red = UOp::Make(Op::kReduceAxis, dt, {Alu(Op::kWhere, {valid, x, identity})}, reduce_->arg());
  const UOp* old_store = ast_->src(0).get();
  UOpRef ast = Substitute(ast_, {{reduce_, red}});
  const UOp* store = ast->src(0).get();
  ShapeTracker store_st = sts_.at(old_store);
  sts_.erase(old_store);
  sts_.emplace(store, store_st);
  sts_.emplace(valid.get(), ShapeTracker::FromShape(full_shape_));
  for (const UOp*& m : mems_)
    if (m == old_store) m = store;
  mems_.push_back(valid.get());
  keep_.push_back(valid);
  ast_ = ast;
  reduce_ = red.get();
  GrowAxis(axis, size);
  return absl::OkStatus();
}

absl::Status Kernel::ApplyOpt(const Opt& opt) { return ApplyOptWithin(opt, opts_.max_upcast); }

absl::Status Kernel::ApplyOptWithin(const Opt& opt, int64_t max_upcast) {
  if (opt.op == OptOp::kLocal) return ApplyLocal(opt);
  if (opt.op == OptOp::kGroup) return ApplyGroup(opt);
  int axis = opt.op == OptOp::kUpcast ? opt.axis : first_reduce_ + opt.axis;
  bool ok_axis = opt.op == OptOp::kUpcast
                     ? (opt.axis >= 0 && opt.axis < first_local())
                     : (axis >= first_reduce_ + group_dims_ && axis < first_upcast());
  if (!ok_axis) return absl::InvalidArgumentError(absl::StrCat("bad axis for ", opt.ToString()));
  if (opt.amount <= 1 || full_shape_[axis] % opt.amount != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(opt.ToString(), " does not divide axis of size ", full_shape_[axis]));
  if (opt.vector && vector_axis_ >= 0)
    return absl::InvalidArgumentError("kernel already has a vector axis");
  int64_t up = opt.amount;
  for (int i = first_upcast(); i < ndim(); ++i) up *= full_shape_[i];
  if (up > max_upcast) return absl::InvalidArgumentError("upcast too large");
  SplitAll(axis, opt.amount);
  if (opt.vector) vector_axis_ = ndim() - 1;
  applied_.push_back(opt);
  return absl::OkStatus();
}

absl::Status Kernel::ApplyLocal(const Opt& opt) {
  if (!opts_.gpu) return absl::InvalidArgumentError("LOCAL needs a GPU renderer");
  if (opt.axis < 0 || opt.axis >= first_local())
    return absl::InvalidArgumentError(absl::StrCat("bad axis for ", opt.ToString()));
  if (opt.amount <= 1 || full_shape_[opt.axis] % opt.amount != 0)
    return absl::InvalidArgumentError(absl::StrCat(opt.ToString(), " does not divide axis of size ",
                                                   full_shape_[opt.axis]));
  if (local_dims_ + group_dims_ >= 3) return absl::InvalidArgumentError("at most 3 block axes");
  int64_t threads = opt.amount * BlockThreads();
  if (threads > opts_.max_local_threads)
    return absl::InvalidArgumentError(absl::StrCat(opt.ToString(), ": ", threads,
                                                   " threads per block is too many"));
  SplitTo(opt.axis, opt.amount, first_reduce_);
  ++first_reduce_;
  ++local_dims_;
  applied_.push_back(opt);
  return absl::OkStatus();
}

int64_t Kernel::BlockThreads() const {
  int64_t threads = 1;
  for (int i = first_local(); i < first_reduce_ + group_dims_; ++i) threads *= full_shape_[i];
  return threads;
}

absl::Status Kernel::ApplyGroup(const Opt& opt) {
  if (!opts_.gpu) return absl::InvalidArgumentError("GROUP needs a GPU renderer");
  const int axis = first_reduce_ + opt.axis;
  if (axis < first_reduce_ + group_dims_ || axis >= first_upcast())
    return absl::InvalidArgumentError(absl::StrCat("bad axis for ", opt.ToString()));
  if (group_dims_ >= 1) return absl::InvalidArgumentError("at most one group axis");
  if (opt.amount <= 1 || full_shape_[axis] % opt.amount != 0)
    return absl::InvalidArgumentError(absl::StrCat(opt.ToString(), " does not divide axis of size ",
                                                   full_shape_[axis]));
  if (opt.amount * BlockThreads() > opts_.max_local_threads || local_dims_ >= 3)  // 3 block axes
    return absl::InvalidArgumentError(absl::StrCat(opt.ToString(), ": block too large"));
  SplitTo(axis, opt.amount, first_reduce_ + group_dims_);
  ++group_dims_;
  applied_.push_back(opt);
  return absl::OkStatus();
}

std::string HeuristicKnobs::ToString() const {
  return absl::StrCat("reuse_first=", reuse_first, " reuse_axes=", reuse_axes,
                      " two_vectors=", two_vectors, " unroll=", unroll, " reorder=", reorder);
}

std::optional<HeuristicKnobs> HeuristicKnobs::Parse(const std::string& s) {
  HeuristicKnobs k;
  int two = 1, re = 1;
  if (std::sscanf(s.c_str(), "reuse_first=%d reuse_axes=%d two_vectors=%d unroll=%d reorder=%d",
                  &k.reuse_first, &k.reuse_axes, &two, &k.unroll, &re) != 5)
    return std::nullopt;
  k.two_vectors = two != 0;
  k.reorder = re != 0;
  return k;
}

void Kernel::HandCodedOptimizations(const HeuristicKnobs& knobs) {
  if (Env().noopt || ndim() == 0) return;
  if (opts_.gpu) {
    GpuOptimizations();
    return;
  }
  const UOp* store = ast_->src(0).get();
  int itemsize = std::max(1, store->src(0)->dtype().ItemSize());
  int64_t width = std::max(1, opts_.vector_bytes / std::max(4, itemsize));
  if (!opts_.supports_float16 && store->src(0)->dtype().ScalarSize() == 2 &&
      store->src(0)->dtype().IsFloat())
    width = std::min<int64_t>(width, 8);
  auto pick = [&](int64_t size) -> int64_t {
    for (int64_t w = width; w >= 4; w /= 2)
      if (size % w == 0) return w;
    return 0;
  };
  std::vector<int64_t> out_strides;
  bool store_plain = Strides(store, &out_strides);
  // 1. Vectorize the global axis the output is contiguous along.
  int vec_axis = -1;
  // Loads along `axis` are vector loads or broadcasts (not gathers).
  // Only the loads inside the reduce loop matter: one after it (a residual
  // add read transposed) runs once per output vector, a gather is fine there.
  std::set<const UOp*> inner;
  if (reduce_)
    for (const UOp* u : Toposort(reduce_->src(0))) inner.insert(u);
  auto loads_vectorize = [&](int axis) {
    for (const UOp* m : mems_) {
      if (m == store || m->op() == Op::kValid || !inner.count(m)) continue;
      std::vector<int64_t> st;
      // Stride 2 (a strided convolution's window) loads two vectors and
      // shuffles (see SpanLoad in lowerer.cc).
      if (!Strides(m, &st) || st[axis] < 0 || st[axis] > 2) return false;
    }
    return true;
  };
  // Some input is broadcast along `axis` (stride 0): upcasting it reuses loads.
  auto broadcast_along = [&](int axis) {
    for (const UOp* m : mems_) {
      std::vector<int64_t> st;
      if (m != store && Strides(m, &st) && st[axis] == 0 && full_shape_[axis] > 1) return true;
    }
    return false;
  };
  bool wide_tiles = false;  // 512-bit matmul tiles (16 accumulators, step 3)
  if (store_plain) {
    for (int i = first_reduce_ - 1; i >= 0; --i) {
      if (out_strides[i] == 1) {
        if (reduce_ && !loads_vectorize(i)) break;
        const int64_t n = full_shape_[i];
        // A matmul-like reduce (some input broadcast along the output row)
        // is bound by the FMA rate: the widest vectors, when the row holds
        // two of them. Sliding windows (3x3 / depthwise convolutions) take
        // them too but keep 12 accumulators (wide_tiles false): 8-row tiles
        // of a 3x3 convolution measured 2x slower than 6-row ones.
        const int64_t wide = opts_.wide_vector_bytes / std::max(4, itemsize);
        const int64_t wide_padded = (n + wide - 1) / wide * wide;
        if (reduce_ && wide > width && broadcast_along(i) &&
            (n >= 2 * wide || (wide_padded - n) * 8 <= wide_padded) &&
            store->src(0)->dtype().ScalarSize() == 4) {
          width = wide;
          wide_tiles = !HasWindow();
        }
        // A matmul-like reduce takes 2, 3 or 5 vectors per tile row (step 3):
        // round up to a vector count it can tile (17 -> 3 vectors of 8, 7 -> 8).
        int64_t vecs = (n + width - 1) / width;
        if (reduce_ && knobs.two_vectors && broadcast_along(i) && n > 2 * width && vecs % 2 != 0 &&
            vecs % 3 != 0 && vecs % 5 != 0)
          ++vecs;
        const int64_t padded = vecs * width;
        int64_t w = pick(n);
        const bool little_waste = (padded - n) * 8 <= padded;
        if ((w < width || n != padded) && width >= 4 &&
            (n > width ? !w || little_waste : reduce_ && little_waste)) {
          // An axis that is not a multiple of the vector width (a padded row
          // of 162, 6625 classes, 100 columns): round it up when that wastes
          // at most 1/8 of the lanes (or, past one vector, nothing else
          // vectorizes); the tail lanes are masked off in every load and
          // store. A row shorter than one vector (a 7x7 feature map) only in
          // a reduce, which is bound by its FMAs. (clang 14 fails to select
          // some masked index arithmetic of 8-lane elementwise kernels.)
          if (PadGlobal(i, padded).ok()) w = width;
        }
        if (w && ApplyOpt({OptOp::kUpcast, i, w, true}).ok()) vec_axis = i;
        break;
      }
    }
  }
  // 2. Or vectorize a reduce axis that the reduce input reads contiguously.
  //    The innermost reduce axis that some load inside the loop reads
  //    contiguously while every other such load reads it contiguously or
  //    not at all (no gathers in the inner loop).
  if (vec_axis < 0 && reduce_) {
    for (int i = first_upcast() - 1; i >= first_reduce_; --i) {
      bool contiguous = false, ok = true;
      for (const UOp* m : mems_) {
        std::vector<int64_t> st;
        if (m == store || m->op() == Op::kValid || !inner.count(m)) continue;
        if (!Strides(m, &st)) ok = false;
        else if (st[i] == 1) contiguous = true;
        else if (st[i] != 0) ok = false;
      }
      if (!contiguous || !ok) continue;
      int64_t w = pick(full_shape_[i]);
      if (!w && width >= 4 && full_shape_[i] > width) {
        // A reduce over a length that is not a multiple of 4 (6625 classes):
        // round it up; the extra lanes reduce the op's identity.
        if (PadReduce(i, (full_shape_[i] + width - 1) / width * width).ok()) w = width;
      }
      if (w) (void)ApplyOpt({OptOp::kUnroll, i - first_reduce_, w, true});
      break;
    }
  }
  if (!reduce_) return;
  // 3. Reuse: upcast global axes along which some input is broadcast (stride
  //    0), so one load feeds several accumulators (matmul register tiling).
  //    A row of one vector feeds its accumulators at one load per FMA
  //    (the weight broadcasts): take 2, else 3 or 5 vectors per tile row (a
  //    40-wide feature map is 5 vectors of 8).
  if (knobs.two_vectors && vec_axis >= 0 && broadcast_along(vec_axis)) {
    for (int64_t amt : {2, 3, 5})
      if (full_shape_[vec_axis] % amt == 0) {
        (void)ApplyOpt({OptOp::kUpcast, vec_axis, amt});
        break;
      }
  }
  // Prefer axes along which a vector load is broadcast (a convolution's
  // input along its output channels): each such load then feeds several
  // accumulators; a broadcast scalar (a weight) is cheap to reload.
  // Without a vector axis, tile two axes (scalar accumulators) instead of one.
  auto reuse_score = [&](int axis) {
    int score = 0;
    for (const UOp* m : mems_) {
      std::vector<int64_t> st;
      if (m == store || !Strides(m, &st) || st[axis] != 0 || full_shape_[axis] <= 1) continue;
      score = std::max(score, vector_axis_ >= 0 && (st[vector_axis_] == 1 || st[vector_axis_] == 2) ? 2 : 1);
    }
    return score;
  };
  std::vector<int> reuse_axes;
  for (int i = first_reduce_ - 1; i >= 0; --i)
    if (i != vec_axis && reuse_score(i) > 0) reuse_axes.push_back(i);
  std::stable_sort(reuse_axes.begin(), reuse_axes.end(),
                   [&](int a, int b) { return reuse_score(a) > reuse_score(b); });
  int reuse_upcasts = knobs.reuse_axes >= 0 ? knobs.reuse_axes : vec_axis >= 0 ? 1 : 2;
  std::vector<int64_t> amounts = {4, 3, 5, 2};
  if (knobs.reuse_first > 0) amounts.insert(amounts.begin(), knobs.reuse_first);
  for (int i : reuse_axes) {
    if (reuse_upcasts == 0) break;
    // A vector operand reused along `i` (a matmul / convolution tile): up to
    // 12 vector accumulators. A 6x2 tile keeps both FMA pipes busy past
    // their latency (4x2, 8 accumulators, measured 10-15% slower; 5x2 in
    // between). Scalar reuse keeps the element budget.
    // Likewise output rows of a stride-1 sliding window of 5 or more rows (a
    // 5x5 depthwise convolution), whose input rows step 3b loads once per
    // tile (3x3 windows measured slower with 6 rows than with 4).
    bool slides = false;
    for (int r = first_reduce_ + group_dims_; r < first_upcast(); ++r)
      slides |= full_shape_[r] >= 5 && WindowStep(i, r) == 1;
    std::vector<int64_t> try_amounts = amounts;
    int64_t budget = opts_.max_upcast;
    if (vec_axis >= 0 && (reuse_score(i) == 2 || slides) && knobs.reuse_first <= 0) {
      // 12 accumulators of 16 registers; 16 of 32 for 512-bit matmul tiles
      // (8 rows of a 3x3 convolution measured 2x slower than 6).
      const int64_t accs = wide_tiles && opts_.vector_registers >= 32 ? 16 : 12;
      // A reused vector operand of one vector per tile row (a 7- or 8-wide
      // feature map) fills the accumulators with more rows: 8 or 12 of one
      // vector (the budget below rejects them for wider rows).
      try_amounts = accs >= 16             ? std::vector<int64_t>{8, 7, 6, 5, 4, 3, 2}
                    : reuse_score(i) == 2 ? std::vector<int64_t>{12, 8, 7, 6, 5, 4, 3, 2}
                                          : std::vector<int64_t>{6, 5, 4, 3, 2};
      budget = std::max<int64_t>(budget, accs * full_shape_[vector_axis_]);
    }
    for (int64_t amt : try_amounts) {
      if (full_shape_[i] % amt == 0 && ApplyOptWithin({OptOp::kUpcast, i, amt}, budget).ok()) {
        --reuse_upcasts;
        break;
      }
    }
  }
  // 3b. Sliding windows: a load whose reduce axis (a window row ky) moves
  //     like an upcast tile axis (output rows) reads rows that neighbouring
  //     tile rows read at other ky. Unrolling that reduce axis makes those
  //     loads the same expression: each input row is loaded once per tile
  //     and feeds every accumulator that needs it (a 5x5 depthwise
  //     convolution with 4 rows per tile: 8 row loads instead of 20).
  if (vec_axis >= 0) UnrollSlidingWindow();
  // 4. Unroll the innermost reduce loop a little.
  int last_reduce = first_upcast() - 1;
  if (knobs.unroll > 1 && last_reduce >= first_reduce_ &&
      full_shape_[last_reduce] >= 4 * knobs.unroll && full_shape_[last_reduce] % knobs.unroll == 0)
    (void)ApplyOpt({OptOp::kUnroll, last_reduce - first_reduce_, knobs.unroll});
  // 5. Loop order with register tiles. A tile column of the reused input
  //    stays in cache while the axes that reuse it (score 2: a vector
  //    operand broadcast along them, e.g. a convolution's output channels)
  //    run inside: sort the global axes by tile size, largest outermost --
  //    only when such an axis exists (a depthwise convolution reuses nothing
  //    and keeps its row-major walk). Untiled leading axes without that
  //    reuse (a batch) stay outermost: each image is walked once.
  if (first_reduce_ >= 2 && upcasted_ > 1) {
    std::vector<int64_t> tile(first_reduce_, 1);
    for (const Opt& o : applied_)
      if (o.op == OptOp::kUpcast) tile[o.axis] *= o.amount;
    int keep = 0;
    while (keep < first_reduce_ && tile[keep] == 1 && reuse_score(keep) < 2) ++keep;
    bool reuse = false;
    for (int a = keep; a < first_reduce_; ++a) reuse |= reuse_score(a) == 2;
    std::vector<int> order(ndim());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin() + keep, order.begin() + first_reduce_,
                     [&](int a, int b) { return tile[a] > tile[b]; });
    bool identity = true;
    for (int i = 0; i < ndim(); ++i) identity &= order[i] == i;
    if (knobs.reorder && reuse && !identity) PermuteAll(order);
  }
}

int64_t Kernel::WindowStep(int u, int r) const {
  const UOp* store = ast_->src(0).get();
  const int64_t k = full_shape_[r];
  if (k < 2 || k > 7 || u == vector_axis_) return 0;
  for (const UOp* m : mems_) {
    std::vector<int64_t> st;
    if (m == store || m->op() == Op::kValid || !Strides(m, &st) || st[r] <= 0) continue;
    if (st[u] <= 0 || st[u] % st[r] != 0) continue;
    const int64_t step = st[u] / st[r];
    if (step < k) return step;
  }
  return 0;
}

bool Kernel::HasWindow() const {
  for (int r = first_reduce_; r < first_upcast(); ++r)
    for (int u = 0; u < first_reduce_; ++u)
      if (WindowStep(u, r) > 0) return true;
  return false;
}

void Kernel::UnrollSlidingWindow() {
  for (int r = first_reduce_ + group_dims_; r < first_upcast(); ++r) {
    const int64_t k = full_shape_[r];
    bool reuse = false;
    for (int u = first_upcast(); u < ndim() && !reuse; ++u) {
      // Tile rows u read rows u * step + ky: (n - 1) * step + k distinct
      // rows instead of n * k.
      const int64_t step = WindowStep(u, r), n = full_shape_[u];
      reuse = step >= 1 && ((n - 1) * step + k) * 4 <= n * k * 3;
    }
    if (!reuse) continue;
    // The unrolled copies add loads and FMAs, not accumulators.
    (void)ApplyOptWithin({OptOp::kUnroll, r - first_reduce_, k}, 8 * opts_.max_upcast);
    return;
  }
}

std::string Kernel::Name() const {
  std::string n = reduce_ ? "r" : "E";
  for (int64_t d : full_shape_) absl::StrAppend(&n, "_", d);
  return n;
}

}  // namespace kiln
