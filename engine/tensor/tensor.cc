// Tensor core: state, construction, realization, elementwise primitives,
// casts and reductions. Movement ops: tensor_movement.cc; composite math:
// tensor_math.cc; nn / indexing ops: tensor_nn.cc, tensor_index.cc; uploads
// and host reads: tensor_host.cc.
#include "engine/tensor/tensor.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/shape/shape_tracker.h"
#include "engine/tensor/tensor_internal.h"
#include "engine/uop/buffer.h"
#include "engine/uop/pattern.h"
#include "engine/uop/symbolic.h"

namespace kiln {

std::string ShapeStr(const Shape& s) { return absl::StrCat("(", absl::StrJoin(s, ","), ")"); }

absl::Status CheckShape(const Shape& s, const char* op) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": shape ", ShapeStr(s), " has a negative dimension"));
    if (d == 0) continue;
    if (n > kMaxTensorElements / d)
      return absl::ResourceExhaustedError(absl::StrCat(
          op, ": shape ", ShapeStr(s), " is too large (more than 2^48 elements)"));
    n *= d;
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      return absl::InvalidArgumentError(
          absl::StrCat("shapes ", ShapeStr(a), " and ", ShapeStr(b), " do not broadcast"));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Tensor::Tensor() : s_(std::make_shared<State>()) {
  s_->error = absl::FailedPreconditionError("uninitialized tensor");
}

Tensor Tensor::Error(absl::Status s) {
  Tensor t;
  t.s_->error = std::move(s);
  return t;
}

Tensor Tensor::FromError(const Tensor& like, absl::Status s) {
  auto st = std::make_shared<State>(*like.s_);
  st->error = std::move(s);
  return Tensor(st);
}

Tensor Tensor::Derive(UOpRef u, Shape shape, DType dtype) const {
  if (absl::Status bad = CheckShape(shape, "tensor"); !bad.ok()) return FromError(*this, bad);
  auto st = std::make_shared<State>();
  st->engine = s_->engine;
  st->device = s_->device;
  st->uop = std::move(u);
  st->shape = std::move(shape);
  st->dtype = dtype;
  return Tensor(st);
}

const absl::Status& Tensor::status() const { return s_->error; }
const Shape& Tensor::shape() const { return s_->shape; }
DType Tensor::dtype() const { return s_->dtype; }
const std::string& Tensor::device() const { return s_->device; }
Engine* Tensor::engine() const { return s_->engine; }
const UOpRef& Tensor::uop() const { return s_->uop; }
int64_t Tensor::numel() const { return kiln::Prod(s_->shape); }
int64_t Tensor::dim(int axis) const {
  int n = ndim();
  if (axis < 0) axis += n;
  // An axis out of range (a caller that did not check a hostile model's
  // rank) reads as -1: any shape built from it is refused as negative.
  if (axis < 0 || axis >= n) return -1;
  return s_->shape[axis];
}

// ---------------- construction ----------------

namespace {
Tensor NewTensor(Engine* e, UOpRef u, Shape shape, DType dtype, const std::string& device,
                 absl::Status error = absl::OkStatus()) {
  auto st = std::make_shared<Tensor::State>();
  st->engine = e;
  st->device = device;
  st->uop = std::move(u);
  st->shape = std::move(shape);
  st->dtype = dtype;
  st->error = std::move(error);
  return TensorInternal::Wrap(st);
}

UOpRef ViewOfBuffer(const UOpRef& buf, const Shape& shape) {
  if (shape.size() == 1 && shape[0] == BufferOf(*buf).size()) return buf;
  ShapeTracker st = ShapeTracker::FromShape({BufferOf(*buf).size()}).Reshape(shape);
  return UOp::Make(Op::kView, buf->dtype(), {buf}, Arg(StArg(st)));
}
}  // namespace

Tensor Tensor::Empty(Engine* e, Shape shape, DType dtype, const std::string& device) {
  if (absl::Status bad = CheckShape(shape, "empty"); !bad.ok())
    return NewTensor(e, nullptr, shape, dtype, device, bad);
  UOpRef buf = NewBuffer(dtype, kiln::Prod(shape), device);
  absl::Status st = e->StorageOf(buf).status();
  return NewTensor(e, ViewOfBuffer(buf, shape), shape, dtype, device, st);
}

Tensor Tensor::FromBuffer(Engine* e, BufferRef buffer, Shape shape, DType dtype,
                          const std::string& device) {
  if (absl::Status bad = CheckShape(shape, "from_buffer"); !bad.ok())
    return NewTensor(e, nullptr, shape, dtype, device, bad);
  int64_t n = kiln::Prod(shape);
  if (!buffer || buffer->nbytes() < static_cast<size_t>(n) * dtype.ItemSize())
    return NewTensor(e, nullptr, shape, dtype, device,
                     absl::InvalidArgumentError("FromBuffer: buffer too small for the shape"));
  UOpRef buf = NewBuffer(dtype, n, device);
  BufferOf(*buf).set_storage(std::move(buffer));
  return NewTensor(e, ViewOfBuffer(buf, shape), shape, dtype, device);
}

Tensor Tensor::Const(ConstValue v, DType dtype) const {
  return NewTensor(s_->engine, UOp::Const(dtype, v), {}, dtype, s_->device);
}

Tensor Tensor::Full(Engine* e, Shape shape, ConstValue value, DType dtype,
                    const std::string& device) {
  if (absl::Status bad = CheckShape(shape, "full"); !bad.ok())
    return NewTensor(e, nullptr, shape, dtype, device, bad);
  Tensor c = NewTensor(e, UOp::Const(dtype, value), {}, dtype, device);
  return c.Reshape(Shape(shape.size(), 1)).Expand(shape);
}
Tensor Tensor::Zeros(Engine* e, Shape s, DType t, const std::string& d) {
  return Full(e, std::move(s), int64_t{0}, t, d);
}
Tensor Tensor::Ones(Engine* e, Shape s, DType t, const std::string& d) {
  return Full(e, std::move(s), int64_t{1}, t, d);
}
Tensor Tensor::FullLike(ConstValue v) const {
  if (!ok()) return *this;
  return Full(s_->engine, s_->shape, v, s_->dtype, s_->device);
}
Tensor Tensor::Scalar(double v) const {
  if (!ok()) return *this;
  if (s_->dtype.IsFloat()) return Const(v, s_->dtype);
  return Const(static_cast<int64_t>(v), s_->dtype);
}

Tensor Tensor::Arange(Engine* e, double start, double stop, double step, DType dtype,
                      const std::string& device) {
  if (step == 0) return Error(absl::InvalidArgumentError("arange: step must not be 0"));
  double steps = std::ceil((stop - start) / step);
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step) || std::isnan(steps))
    return Error(absl::InvalidArgumentError("arange: start, stop and step must be finite"));
  if (steps > static_cast<double>(kMaxHostIota))
    return Error(absl::ResourceExhaustedError(absl::StrCat(
        "arange: ", steps, " elements is too large (more than 2^28, built on the host)")));
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(steps));
  std::vector<double> vals(n);
  for (int64_t i = 0; i < n; ++i) vals[i] = start + static_cast<double>(i) * step;
  Tensor f = FromVector(e, vals, {n}, dtypes::kFloat64, device);
  return dtype == dtypes::kFloat64 ? f : f.Cast(dtype);
}

Tensor Tensor::Eye(Engine* e, int64_t n, DType dtype, const std::string& device) {
  Tensor a = Arange(e, 0, static_cast<double>(n), 1, dtypes::kInt32, device);
  return a.Reshape({n, 1}).Eq(a.Reshape({1, n})).Cast(dtype);
}

namespace {
// lowbias32: a strong 32-bit integer hash (Chris Wellons), in tensor ops.
Tensor Hash32(const Tensor& x) {
  Tensor h = x;
  h = h.BitwiseXor(h.ShiftRight(h.Scalar(16)));
  h = h.Mul(h.Const(int64_t{0x7feb352d}, dtypes::kUInt32));
  h = h.BitwiseXor(h.ShiftRight(h.Scalar(15)));
  h = h.Mul(h.Const(int64_t{0x846ca68b}, dtypes::kUInt32));
  return h.BitwiseXor(h.ShiftRight(h.Scalar(16)));
}
}  // namespace

Tensor Tensor::Rand(Engine* e, Shape shape, uint64_t seed, DType dtype, const std::string& device) {
  if (absl::Status bad = CheckShape(shape, "rand"); !bad.ok())
    return NewTensor(e, nullptr, shape, dtype, device, bad);
  int64_t n = kiln::Prod(shape);
  Tensor idx = Arange(e, 0, static_cast<double>(n), 1, dtypes::kUInt32, device);
  Tensor s0 = idx.Const(static_cast<int64_t>(seed & 0xffffffffu), dtypes::kUInt32);
  Tensor s1 = idx.Const(static_cast<int64_t>((seed >> 32) ^ 0x9e3779b9u), dtypes::kUInt32);
  Tensor h = Hash32(Hash32(idx.BitwiseXor(s0)).Add(s1));
  Tensor u = h.ShiftRight(h.Scalar(8)).Cast(dtypes::kFloat32) * (1.0 / 16777216.0);
  u = u.Reshape(shape);
  return dtype == dtypes::kFloat32 ? u : u.Cast(dtype);
}

Tensor Tensor::Randn(Engine* e, Shape shape, uint64_t seed, DType dtype,
                     const std::string& device) {
  Tensor u1 = Rand(e, shape, seed, dtypes::kFloat32, device);
  Tensor u2 = Rand(e, shape, seed ^ 0x5bd1e9955bd1e995ULL, dtypes::kFloat32, device);
  Tensor r = (u1.Scalar(1.0) - u1).Log().Mul(u1.Scalar(-2.0)).Sqrt();
  Tensor z = r * (u2 * (2 * M_PI)).Cos();
  return dtype == dtypes::kFloat32 ? z : z.Cast(dtype);
}

// ---------------- realization ----------------

absl::Status Tensor::RealizeAll(std::vector<Tensor*> ts) {
  UOpList roots;
  std::vector<Tensor*> todo;
  for (Tensor* t : ts) {
    RETURN_IF_ERROR(t->status());
    const UOpRef& u = t->uop();
    if (u->op() == Op::kBuffer) continue;
    if (u->op() == Op::kView && u->src(0)->op() == Op::kBuffer && StOf(*u)->contiguous() &&
        StOf(*u)->size() == BufferOf(*u->src(0)).size())
      continue;
    roots.push_back(u);
    todo.push_back(t);
  }
  if (roots.empty()) return absl::OkStatus();
  Engine* e = todo[0]->engine();
  ASSIGN_OR_RETURN(UOpList bufs, e->Realize(roots, todo[0]->device()));
  for (size_t i = 0; i < todo.size(); ++i) todo[i]->s_->uop = ViewOfBuffer(bufs[i], todo[i]->shape());
  return absl::OkStatus();
}

absl::Status Tensor::Realize() { return RealizeAll({this}); }

namespace {

// The buffer indices [lo, hi] a single-view tracker touches with its bound
// variables at their values; nullopt when that is not known.
std::optional<std::pair<int64_t, int64_t>> TouchedRange(const ShapeTracker& st) {
  if (st.views().size() != 1) return std::nullopt;
  const View& v = st.view();
  int64_t lo = v.offset(), hi = v.offset();
  if (const UOpRef& sym = v.symbolic_offset()) {
    std::unordered_map<const UOp*, UOpRef> values;
    for (const UOp* x : Toposort(sym))
      if (x->op() == Op::kBind) values[x] = x->src(1);
    UOpRef c = Simplify(Substitute(sym, values));
    if (!c->IsConst()) return std::nullopt;
    lo += std::get<int64_t>(c->const_value());
    hi = lo;
  }
  for (size_t d = 0; d < v.ndim(); ++d) {
    if (v.shape()[d] == 0) return std::nullopt;
    int64_t span = (v.shape()[d] - 1) * v.strides()[d];
    (span < 0 ? lo : hi) += span;
  }
  return std::make_pair(lo, hi);
}

}  // namespace

absl::Status Tensor::Assign(const Tensor& value) {
  if (!ok()) return status();
  if (!value.ok()) return value.status();
  if (value.shape() != shape() || value.dtype() != dtype())
    return absl::InvalidArgumentError(absl::StrCat(
        "assign: a ", value.dtype().Name(), " value of shape (", absl::StrJoin(value.shape(), ","),
        ") into a ", dtype().Name(), " tensor of shape (", absl::StrJoin(shape(), ","), ")"));
  if (value.engine() != engine() || value.device() != device())
    return absl::InvalidArgumentError("assign: the value lives on another device");
  const UOpRef& u = uop();
  const bool view = u->op() == Op::kView && u->src(0)->op() == Op::kBuffer;
  if (!view && u->op() != Op::kBuffer)
    return absl::InvalidArgumentError("assign: the target is not a view of a realized buffer");
  ScheduleTarget target{view ? u->src(0) : u,
                        view ? *StOf(*u) : ShapeTracker::FromShape(shape())};
  if (target.st.HasMask())
    return absl::InvalidArgumentError("assign: the target is a padded view");
  // A value reading the target's buffer through another view that may
  // overlap the written elements would race with the writes: compute it into
  // a buffer of its own first. (Reading another row of it is fine.)
  Tensor v = value;
  std::optional<std::pair<int64_t, int64_t>> written = TouchedRange(target.st);
  for (const UOp* x : Toposort(v.uop())) {
    if (x->op() != Op::kView || x->src(0) != target.buffer || *StOf(*x) == target.st) continue;
    std::optional<std::pair<int64_t, int64_t>> read = TouchedRange(*StOf(*x));
    if (written && read && (read->second < written->first || written->second < read->first))
      continue;
    RETURN_IF_ERROR(v.Realize());
    break;
  }
  return engine()->RealizeInto(v.Contiguous().uop(), target, device());
}

// ---------------- elementwise primitives ----------------

Tensor Tensor::Elementwise(Op op, const std::vector<Tensor>& srcs, DType dtype) const {
  Shape shape = {};
  for (const Tensor& t : srcs) {
    if (!t.ok()) return t;
    if (t.engine() != engine() || t.device() != device())
      return FromError(*this, absl::InvalidArgumentError(absl::StrCat(
                                  OpName(op), ": tensors are on different devices / engines")));
    auto b = BroadcastShapes(shape, t.shape());
    if (!b.ok()) return FromError(*this, absl::InvalidArgumentError(absl::StrCat(OpName(op), ": ", b.status().message())));
    shape = *b;
  }
  UOpList src;
  for (const Tensor& t : srcs) src.push_back(t.Expand(shape).uop());
  return Derive(UOp::Make(op, dtype, src), shape, dtype);
}

Tensor Tensor::Binary(Op op, const Tensor& o, bool bool_result) const {
  if (!ok()) return *this;
  if (!o.ok()) return o;
  DType t = PromoteTypes(dtype(), o.dtype());
  Tensor a = dtype() == t ? *this : Cast(t);
  Tensor b = o.dtype() == t ? o : o.Cast(t);
  return a.Elementwise(op, {a, b}, bool_result ? dtypes::kBool : t);
}

Tensor Tensor::Cast(DType t) const {
  if (!ok() || t == dtype()) return *this;
  return Derive(UOp::Make(Op::kCast, t, {uop()}), shape(), t);
}

Tensor Tensor::Bitcast(DType t) const {
  if (!ok() || t == dtype()) return *this;
  if (t.ItemSize() != dtype().ItemSize())
    return FromError(*this, absl::InvalidArgumentError("bitcast between sizes is not supported"));
  return Derive(UOp::Make(Op::kBitcast, t, {uop()}), shape(), t);
}

Tensor Tensor::Contiguous() const {
  if (!ok()) return *this;
  return Derive(UOp::Make(Op::kContiguous, dtype(), {uop()}), shape(), dtype());
}

bool Tensor::Stored() const {
  if (!ok()) return false;
  auto stored = [](const UOp* s) { return s->op() == Op::kBuffer || s->op() == Op::kContiguous; };
  const UOp* u = uop().get();
  return stored(u) || (u->op() == Op::kView && stored(u->src(0).get()));
}

Tensor Tensor::Neg() const {
  if (!ok()) return *this;
  if (dtype().IsBool()) return LogicalNot();
  return Elementwise(Op::kNeg, {*this}, dtype());
}
// Float-valued primitives cast integer inputs to their float type first.
Tensor Tensor::Exp2() const {
  Tensor x = Cast(FloatType(dtype()));
  return x.Elementwise(Op::kExp2, {x}, x.dtype());
}
Tensor Tensor::Log2() const {
  Tensor x = Cast(FloatType(dtype()));
  return x.Elementwise(Op::kLog2, {x}, x.dtype());
}
Tensor Tensor::Sqrt() const {
  Tensor x = Cast(FloatType(dtype()));
  return x.Elementwise(Op::kSqrt, {x}, x.dtype());
}
Tensor Tensor::Sin() const {
  Tensor x = Cast(FloatType(dtype()));
  return x.Elementwise(Op::kSin, {x}, x.dtype());
}
Tensor Tensor::Reciprocal() const {
  Tensor x = Cast(FloatType(dtype()));
  return x.Elementwise(Op::kRecip, {x}, x.dtype());
}
Tensor Tensor::Trunc() const {
  if (!dtype().IsFloat()) return *this;
  return Elementwise(Op::kTrunc, {*this}, dtype());
}

namespace {
// Float ops on integer tensors compute in float32.
Tensor AsFloat(const Tensor& t) { return t.dtype().IsFloat() ? t : t.Cast(dtypes::kFloat32); }
}  // namespace

DType FloatType(DType t) { return t.IsFloat() ? t : dtypes::kFloat32; }

Tensor Tensor::Add(const Tensor& o) const { return Binary(Op::kAdd, o); }
Tensor Tensor::Sub(const Tensor& o) const { return Binary(Op::kSub, o); }
Tensor Tensor::Mul(const Tensor& o) const { return Binary(Op::kMul, o); }
Tensor Tensor::Div(const Tensor& o) const {
  if (!ok()) return *this;
  DType t = PromoteTypes(dtype(), o.dtype());
  return Binary(t.IsFloat() ? Op::kFDiv : Op::kIDiv, o);
}
Tensor Tensor::Pow(const Tensor& o) const {
  if (!ok()) return *this;
  DType t = PromoteTypes(dtype(), o.dtype());
  if (t.IsFloat()) return Binary(Op::kPow, o);
  // Integer powers: compute in float64 and round back.
  Tensor r = Cast(dtypes::kFloat64).Binary(Op::kPow, o.Cast(dtypes::kFloat64));
  return r.Round().Cast(t);
}
Tensor Tensor::Maximum(const Tensor& o) const { return Binary(Op::kMax, o); }
Tensor Tensor::Lt(const Tensor& o) const { return Binary(Op::kCmpLt, o, true); }
Tensor Tensor::Gt(const Tensor& o) const { return o.Binary(Op::kCmpLt, *this, true); }
Tensor Tensor::Eq(const Tensor& o) const { return Binary(Op::kCmpEq, o, true); }
Tensor Tensor::Ne(const Tensor& o) const { return Binary(Op::kCmpNe, o, true); }
Tensor Tensor::Le(const Tensor& o) const { return Lt(o).LogicalOr(Eq(o)); }
Tensor Tensor::Ge(const Tensor& o) const { return Gt(o).LogicalOr(Eq(o)); }
// Bitwise ops and shifts are defined on integers and bool: a float operand
// is an error here, not a kernel that the device compiler refuses.
Tensor Tensor::IntegerBinary(Op op, const Tensor& o, const char* name) const {
  if (ok() && o.ok() && (dtype().IsFloat() || o.dtype().IsFloat()))
    return FromError(*this, absl::InvalidArgumentError(
                                absl::StrCat(name, ": needs integer or bool operands, got ",
                                             dtype().Name(), " and ", o.dtype().Name())));
  return Binary(op, o);
}
Tensor Tensor::BitwiseAnd(const Tensor& o) const { return IntegerBinary(Op::kAnd, o, "bitwise_and"); }
Tensor Tensor::BitwiseOr(const Tensor& o) const { return IntegerBinary(Op::kOr, o, "bitwise_or"); }
Tensor Tensor::BitwiseXor(const Tensor& o) const { return IntegerBinary(Op::kXor, o, "bitwise_xor"); }
Tensor Tensor::ShiftLeft(const Tensor& o) const { return IntegerBinary(Op::kShl, o, "shift_left"); }
Tensor Tensor::ShiftRight(const Tensor& o) const { return IntegerBinary(Op::kShr, o, "shift_right"); }
Tensor Tensor::LogicalAnd(const Tensor& o) const {
  return Cast(dtypes::kBool).Binary(Op::kAnd, o.Cast(dtypes::kBool));
}
Tensor Tensor::LogicalOr(const Tensor& o) const {
  return Cast(dtypes::kBool).Binary(Op::kOr, o.Cast(dtypes::kBool));
}
Tensor Tensor::LogicalXor(const Tensor& o) const {
  return Cast(dtypes::kBool).Binary(Op::kXor, o.Cast(dtypes::kBool));
}
Tensor Tensor::LogicalNot() const {
  Tensor b = Cast(dtypes::kBool);
  return b.Binary(Op::kCmpEq, b.Const(int64_t{0}, dtypes::kBool), true);
}
Tensor Tensor::BitwiseNot() const {
  if (dtype().IsBool()) return LogicalNot();
  return BitwiseXor(Const(int64_t{-1}, dtype()));
}

Tensor Tensor::Where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (!cond.ok()) return cond;
  if (!a.ok()) return a;
  if (!b.ok()) return b;
  DType t = PromoteTypes(a.dtype(), b.dtype());
  Tensor c = cond.Cast(dtypes::kBool);
  return c.Elementwise(Op::kWhere, {c, a.Cast(t), b.Cast(t)}, t);
}

Tensor Tensor::Minimum(const Tensor& o) const {
  if (!ok()) return *this;
  DType t = PromoteTypes(dtype(), o.dtype());
  if (t.IsFloat()) return Cast(t).Neg().Maximum(o.Cast(t).Neg()).Neg();
  return Cast(t).BitwiseNot().Maximum(o.Cast(t).BitwiseNot()).BitwiseNot();
}

// ---------------- reductions ----------------

absl::StatusOr<std::vector<int64_t>> Tensor::NormAxes(std::vector<int64_t> axes) const {
  int n = ndim();
  if (axes.empty())
    for (int i = 0; i < n; ++i) axes.push_back(i);
  std::vector<bool> seen(n, false);
  for (int64_t& a : axes) {
    if (a < 0) a += n;
    if (a < 0 || a >= n)
      return absl::InvalidArgumentError(absl::StrCat("axis out of range for shape ", ShapeStr(shape())));
    if (seen[a]) return absl::InvalidArgumentError("repeated axis");
    seen[a] = true;
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

Tensor Tensor::Reduce(Op op, std::vector<int64_t> axes_in, bool keepdim) const {
  if (!ok()) return *this;
  auto axes = NormAxes(std::move(axes_in));
  if (!axes.ok()) return FromError(*this, axes.status());
  Shape out = shape();
  for (int64_t a : *axes) out[a] = 1;
  Tensor r;
  if (axes->empty() || numel() == 0) {
    // Nothing to reduce over, or an empty input: the identity fills the output.
    if (numel() == 0) {
      double id = op == Op::kAdd ? 0 : op == Op::kMul ? 1
                : dtype().IsFloat() ? -INFINITY : DTypeMin(dtype());
      r = Full(engine(), out, dtype().IsFloat() ? ConstValue(id) : ConstValue(static_cast<int64_t>(id)),
               dtype(), device());
    } else {
      r = *this;
    }
  } else {
    r = Derive(UOp::Make(Op::kReduceAxis, dtype(), {uop()}, ReduceArg(op, *axes)), out, dtype());
  }
  if (keepdim) return r;
  Shape squeezed;
  for (int i = 0; i < ndim(); ++i)
    if (!std::binary_search(axes->begin(), axes->end(), i)) squeezed.push_back(shape()[i]);
  return r.Reshape(squeezed);
}

namespace {
DType AccType(DType t) {
  if (t.IsBool()) return dtypes::kInt32;
  if (t == dtypes::kFloat16 || t == dtypes::kBFloat16) return dtypes::kFloat32;
  return t;
}
}  // namespace

Tensor Tensor::Sum(std::vector<int64_t> axes, bool keepdim) const {
  DType acc = AccType(dtype());
  Tensor r = Cast(acc).Reduce(Op::kAdd, std::move(axes), keepdim);
  return (acc == dtype() || dtype().IsBool()) ? r : r.Cast(dtype());
}
Tensor Tensor::Prod(std::vector<int64_t> axes, bool keepdim) const {
  DType acc = AccType(dtype());
  Tensor r = Cast(acc).Reduce(Op::kMul, std::move(axes), keepdim);
  return (acc == dtype() || dtype().IsBool()) ? r : r.Cast(dtype());
}
Tensor Tensor::Max(std::vector<int64_t> axes, bool keepdim) const {
  if (dtype().IsBool()) return Cast(dtypes::kUInt8).Reduce(Op::kMax, axes, keepdim).Cast(dtypes::kBool);
  return Reduce(Op::kMax, std::move(axes), keepdim);
}
Tensor Tensor::Min(std::vector<int64_t> axes, bool keepdim) const {
  if (dtype().IsFloat()) return Neg().Max(std::move(axes), keepdim).Neg();
  if (dtype().IsBool())
    return LogicalNot().Max(std::move(axes), keepdim).LogicalNot();
  return BitwiseNot().Max(std::move(axes), keepdim).BitwiseNot();
}
Tensor Tensor::Mean(std::vector<int64_t> axes, bool keepdim) const {
  if (!ok()) return *this;
  auto a = NormAxes(axes);
  if (!a.ok()) return FromError(*this, a.status());
  int64_t n = 1;
  for (int64_t x : *a) n *= shape()[x];
  Tensor s = Sum(*a, keepdim);
  if (!dtype().IsFloat()) return s.Div(s.Scalar(static_cast<double>(std::max<int64_t>(n, 1))));
  return s * (1.0 / static_cast<double>(n));
}
Tensor Tensor::Var(std::vector<int64_t> axes, bool keepdim, int64_t correction) const {
  if (!ok()) return *this;
  auto a = NormAxes(axes);
  if (!a.ok()) return FromError(*this, a.status());
  int64_t n = 1;
  for (int64_t x : *a) n *= shape()[x];
  Tensor x = AsFloat(*this);
  Tensor d = x - x.Mean(*a, true);
  return d.Square().Sum(*a, keepdim) * (1.0 / static_cast<double>(std::max<int64_t>(n - correction, 0)));
}
Tensor Tensor::Std(std::vector<int64_t> axes, bool keepdim, int64_t correction) const {
  return Var(std::move(axes), keepdim, correction).Sqrt();
}

}  // namespace kiln
