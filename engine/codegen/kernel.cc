#include "engine/codegen/kernel.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
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

void Kernel::ClearViewCaches() {
  parallel_axis_ = -1;  // chosen from the views, last (ChooseParallelAxis)
  stride_cache_.clear();
  gate_cache_.clear();
  masked_out_cache_.clear();
}

const Shape& Kernel::output_shape() const { return sts_.at(ast_->src(0).get()).shape(); }

bool Kernel::IsReduceAxis(int axis) const {
  return full_shape_[axis] != output_shape()[axis];
}

void Kernel::PermuteAll(const std::vector<int>& order) {
  ClearViewCaches();
  for (auto& [u, st] : sts_) st = st.Permute(order);
  Shape f;
  for (int o : order) f.push_back(full_shape_[o]);
  full_shape_ = f;
}

void Kernel::ReshapeAll(const std::vector<Shape>& shapes) {
  // shapes[0]: new full shape, shapes[1]: new output shape.
  const Shape old_full = full_shape_;
  ClearViewCaches();
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

namespace {
std::optional<int64_t> IntConst(const UOp& u) {
  if (!u.IsConst()) return std::nullopt;
  ConstValue v = u.const_value();
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return std::nullopt;
}

// One index variable per axis of `st`, over the axis' range.
UOpList AxisVariables(const ShapeTracker& st) {
  UOpList vars;
  for (size_t i = 0; i < st.ndim(); ++i)
    vars.push_back(UOp::Variable(absl::StrCat("idx", i), 0, std::max<int64_t>(st.shape()[i] - 1, 0)));
  return vars;
}
}  // namespace

std::vector<int64_t> Kernel::MaskCuts(int axis) const {
  std::set<int64_t> cuts;
  const int64_t size = full_shape_[axis];
  auto cut = [&](int64_t c) {
    if (c > 0 && c < size) cuts.insert(c);
  };
  for (const UOp* m : mems_) {
    const ShapeTracker& st = sts_.at(m);
    bool masked = false;
    for (const View& v : st.views()) masked |= v.mask().has_value();
    if (!masked) continue;
    if (st.views().size() == 1) {
      auto [lo, hi] = (*st.view().mask())[axis];
      cut(lo), cut(hi);
      continue;
    }
    // Several views (a padded part reshaped): the composed gate, read for
    // comparisons of the axis with constants (x < c, and -x < c for x > -c).
    const auto [xv, valid] = ComposedGate(m, axis);
    const UOp* x = xv.get();
    for (const UOp* u : Toposort(valid)) {
      if (u->op() != Op::kCmpLt) continue;
      const std::optional<int64_t> c = IntConst(*u->src(1));
      if (!c) continue;
      const UOp* l = u->src(0).get();
      if (l == x) cut(*c);
      if (l->op() == Op::kMul && l->src(0).get() == x && IntConst(*l->src(1)) == -1) cut(1 - *c);
    }
  }
  return {cuts.begin(), cuts.end()};
}

std::vector<int64_t> Kernel::PartCuts(int axis) const {
  std::vector<int64_t> cuts = MaskCuts(axis);
  if (cuts.size() < 2) cuts.clear();
  return cuts;
}

std::pair<UOpRef, UOpRef> Kernel::ComposedGate(const UOp* mem, int axis) const {
  auto it = gate_cache_.find(mem);
  if (it == gate_cache_.end()) {
    UOpList vars = AxisVariables(sts_.at(mem));
    UOpRef gate = sts_.at(mem).ToValid(vars);
    it = gate_cache_.emplace(mem, std::pair{std::move(vars), std::move(gate)}).first;
  }
  return {it->second.first[axis], it->second.second};
}

bool Kernel::MaskedOutOn(const UOp* mem, int axis, int64_t lo, int64_t hi) const {
  const ShapeTracker& st = sts_.at(mem);
  if (!st.HasMask() || lo >= hi) return false;
  if (st.views().size() == 1) {
    auto [a, b] = (*st.view().mask())[axis];
    return b <= lo || a >= hi;
  }
  const auto [x, gate] = ComposedGate(mem, axis);
  auto [hit, added] = masked_out_cache_.emplace(std::tuple{gate.get(), lo, hi}, false);
  if (added)
    hit->second =
        Simplify(Substitute(gate, {{x.get(), UOp::Variable("seg", lo, hi - 1)}}))->IsConstInt(0);
  return hit->second;
}

int Kernel::ParallelAxis() const {
  if (parallel_axis_ >= 0) return parallel_axis_;
  for (int a = 0; a < first_reduce_; ++a)
    if (full_shape_[a] > 1) return a;
  return -1;
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
    const UOpList vars = AxisVariables(st);
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
  ClearViewCaches();
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
  ClearViewCaches();
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

std::string Kernel::Name() const {
  std::string n = reduce_ ? "r" : "E";
  for (int64_t d : full_shape_) absl::StrAppend(&n, "_", d);
  return n;
}

}  // namespace kiln
