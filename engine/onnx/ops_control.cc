// Control flow and sequence / optional values: If, Loop, Scan (unrolled at
// graph-build time; conditions and trip counts are read on the host),
// Sequence*, SplitToSequence, ConcatFromSequence, Optional*.
#include "engine/onnx/graph_builder.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/ops_common.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {
namespace {

constexpr int64_t kMaxIterations = 100000;
// Most pieces SplitToSequence makes.
constexpr int64_t kMaxSequenceLength = 100000;

absl::StatusOr<bool> StaticBool(const OpContext& ctx, int i) {
  ASSIGN_OR_RETURN(HostTensor h, ctx.Static(i));
  if (h.numel() != 1) return Invalid(absl::StrCat("input ", i, " must be a single boolean"));
  return h.GetInt(0) != 0 || h.GetDouble(0) != 0;
}

absl::StatusOr<Tensor> AsTensor(const OpContext& ctx, const OnnxValue& v) {
  if (!v.is_tensor()) return Invalid("value is not a tensor");
  if (v.tensor) return *v.tensor;
  return v.host->ToTensor(ctx.engine(), ctx.device());
}

absl::Status IfOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(bool cond, StaticBool(ctx, 0));
  const onnx::GraphProto* then_g = ctx.Graph("then_branch");
  const onnx::GraphProto* else_g = ctx.Graph("else_branch");
  if (then_g == nullptr || else_g == nullptr) return Invalid("missing then_branch / else_branch");
  const onnx::GraphProto* g = cond ? then_g : else_g;
  ASSIGN_OR_RETURN(std::vector<OnnxValue> outs,
                   ctx.builder()->RunSubgraph(*g, {}, ctx.builder()->current_scope()));
  if (static_cast<int>(outs.size()) < ctx.num_outputs())
    return Invalid("the branch has fewer outputs than the node");
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.SetValue(i, outs[i]);
  return absl::OkStatus();
}

// Stacks per-iteration scan outputs along a new axis 0.
absl::StatusOr<OnnxValue> StackScan(const OpContext& ctx, const std::vector<OnnxValue>& items) {
  if (items.empty()) return Unsupported("a scan output of zero iterations is not supported");
  std::vector<Tensor> ts;
  for (const OnnxValue& v : items) {
    ASSIGN_OR_RETURN(Tensor t, AsTensor(ctx, v));
    ts.push_back(t.Unsqueeze(0));
  }
  return OnnxValue::FromTensor(ts.size() == 1 ? ts[0] : Tensor::Cat(ts, 0));
}

absl::Status LoopOp(OpContext& ctx) {
  if (ctx.num_inputs() < 2) return Invalid("needs M and cond inputs");
  const onnx::GraphProto* body = ctx.Graph("body");
  if (body == nullptr) return Invalid("missing body");
  int64_t max_trip = kMaxIterations;
  if (ctx.Has(0)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> m, ctx.StaticInts(0));
    if (m.size() != 1) return Invalid("M must be a scalar");
    max_trip = m[0];
  }
  bool cond = true;
  if (ctx.Has(1)) {
    ASSIGN_OR_RETURN(cond, StaticBool(ctx, 1));
  }
  int n_carried = ctx.num_inputs() - 2;
  std::vector<OnnxValue> carried;
  for (int i = 0; i < n_carried; ++i) carried.push_back(ctx.Raw(2 + i));
  int n_scan = ctx.num_outputs() - n_carried;
  if (n_scan < 0) return Invalid("fewer outputs than loop-carried values");
  std::vector<std::vector<OnnxValue>> scans(n_scan);
  int64_t it = 0;
  for (; it < max_trip && cond; ++it) {
    if (it >= kMaxIterations) return Unsupported("loop runs too many iterations");
    std::vector<OnnxValue> in = {OnnxValue::FromHost(HostTensor::FromInt64s({it}, {})),
                                 OnnxValue::FromHost(HostTensor::FromInt64s({1}, {}, dtypes::kBool))};
    in.insert(in.end(), carried.begin(), carried.end());
    ASSIGN_OR_RETURN(std::vector<OnnxValue> out,
                     ctx.builder()->RunSubgraph(*body, in, ctx.builder()->current_scope()));
    if (static_cast<int>(out.size()) != 1 + n_carried + n_scan)
      return Invalid("the body's outputs do not match the node");
    const OnnxValue& c = out[0];
    if (!c.is_tensor()) return Invalid("the body's condition is not a tensor");
    HostTensor ch;
    if (c.host) {
      ch = *c.host;
    } else {
      ASSIGN_OR_RETURN(ch, ctx.builder()->ReadOnHost(*c.tensor));
    }
    cond = ch.numel() == 1 && ch.GetInt(0) != 0;
    for (int i = 0; i < n_carried; ++i) carried[i] = out[1 + i];
    for (int i = 0; i < n_scan; ++i) scans[i].push_back(out[1 + n_carried + i]);
  }
  for (int i = 0; i < n_carried; ++i) ctx.SetValue(i, carried[i]);
  for (int i = 0; i < n_scan; ++i) {
    ASSIGN_OR_RETURN(OnnxValue v, StackScan(ctx, scans[i]));
    ctx.SetValue(n_carried + i, v);
  }
  return absl::OkStatus();
}

// Element t of x along axis 0.
Tensor Step(const Tensor& x, int64_t t) {
  Pads b = {{t, t + 1}};
  for (int d = 1; d < x.ndim(); ++d) b.push_back({0, x.dim(d)});
  return x.Shrink(b).Squeeze({0});
}

// Runs a Scan body over `xs` (scan axis first, directions applied); updates
// `state` and returns each scan output's per-step values.
absl::StatusOr<std::vector<std::vector<OnnxValue>>> ScanLoop(const OpContext& ctx,
                                                             const onnx::GraphProto& body,
                                                             std::vector<OnnxValue>* state,
                                                             const std::vector<Tensor>& xs,
                                                             int n_out_scan) {
  int64_t len = xs.empty() ? 0 : xs[0].dim(0);
  for (const Tensor& x : xs)
    if (x.dim(0) != len) return Invalid("scan inputs differ in length");
  std::vector<std::vector<OnnxValue>> scans(n_out_scan);
  size_t n_state = state->size();
  for (int64_t t = 0; t < len; ++t) {
    std::vector<OnnxValue> in = *state;
    for (const Tensor& x : xs) in.push_back(OnnxValue::FromTensor(Step(x, t)));
    ASSIGN_OR_RETURN(std::vector<OnnxValue> out,
                     ctx.builder()->RunSubgraph(body, in, ctx.builder()->current_scope()));
    if (out.size() != n_state + n_out_scan) return Invalid("the body's outputs do not match the node");
    for (size_t i = 0; i < n_state; ++i) (*state)[i] = out[i];
    for (int i = 0; i < n_out_scan; ++i) scans[i].push_back(out[n_state + i]);
  }
  return scans;
}

// Scan-8: every input has a batch axis 0; scan inputs scan along axis 1.
absl::Status Scan8(OpContext& ctx, const onnx::GraphProto& body, int64_t n_scan_in) {
  int n_state = ctx.num_inputs() - 1 - static_cast<int>(n_scan_in);
  int n_out_scan = ctx.num_outputs() - n_state;
  if (n_state < 0 || n_out_scan < 0) return Invalid("bad num_scan_inputs");
  std::vector<int64_t> dirs = ctx.Ints("directions");
  std::vector<Tensor> states, xs;
  for (int i = 0; i < n_state; ++i) {
    ASSIGN_OR_RETURN(Tensor s, ctx.In(1 + i));
    states.push_back(s);
  }
  int64_t batch = -1;
  for (int i = 0; i < n_scan_in; ++i) {
    ASSIGN_OR_RETURN(Tensor x, ctx.In(1 + n_state + i));
    if (x.ndim() < 2) return Invalid("scan inputs need (batch, sequence, ...)");
    if (i < static_cast<int>(dirs.size()) && dirs[i] != 0) x = x.Flip({1});
    batch = x.dim(0);
    xs.push_back(x);
  }
  if (ctx.Has(0)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> lens, ctx.StaticInts(0));
    for (int64_t l : lens)
      if (!xs.empty() && l != xs[0].dim(1))
        return Unsupported("sequence_lens shorter than the sequence are not supported");
  }
  std::vector<std::vector<Tensor>> final_states(n_state), outs(n_out_scan);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<OnnxValue> state;
    for (const Tensor& s : states) state.push_back(OnnxValue::FromTensor(Step(s, b)));
    std::vector<Tensor> xb;
    for (const Tensor& x : xs) xb.push_back(Step(x, b));
    ASSIGN_OR_RETURN(auto scans, ScanLoop(ctx, body, &state, xb, n_out_scan));
    for (int i = 0; i < n_state; ++i) {
      ASSIGN_OR_RETURN(Tensor t, AsTensor(ctx, state[i]));
      final_states[i].push_back(t);
    }
    for (int i = 0; i < n_out_scan; ++i) {
      ASSIGN_OR_RETURN(OnnxValue v, StackScan(ctx, scans[i]));
      outs[i].push_back(*v.tensor);
    }
  }
  for (int i = 0; i < n_state; ++i) ctx.Set(i, Tensor::Stack(final_states[i], 0));
  for (int i = 0; i < n_out_scan; ++i) ctx.Set(n_state + i, Tensor::Stack(outs[i], 0));
  return absl::OkStatus();
}

absl::Status ScanOp(OpContext& ctx) {
  const onnx::GraphProto* body = ctx.Graph("body");
  if (body == nullptr) return Invalid("missing body");
  int64_t n_scan_in = ctx.Int("num_scan_inputs", 0);
  if (n_scan_in <= 0) return Invalid("bad num_scan_inputs");
  if (ctx.opset() < 9) return Scan8(ctx, *body, n_scan_in);
  int n_state = ctx.num_inputs() - static_cast<int>(n_scan_in);
  if (n_state < 0) return Invalid("bad num_scan_inputs");
  std::vector<int64_t> in_axes = ctx.Ints("scan_input_axes"),
                       in_dirs = ctx.Ints("scan_input_directions"),
                       out_axes = ctx.Ints("scan_output_axes"),
                       out_dirs = ctx.Ints("scan_output_directions");
  std::vector<Tensor> xs;
  for (int i = 0; i < n_scan_in; ++i) {
    ASSIGN_OR_RETURN(Tensor x, ctx.In(n_state + i));
    int64_t axis = i < static_cast<int>(in_axes.size()) ? in_axes[i] : 0;
    ASSIGN_OR_RETURN(axis, NormAxis(axis, x.ndim()));
    std::vector<int64_t> perm = {axis};  // scan axis first, the others in order
    for (int64_t d = 0; d < x.ndim(); ++d)
      if (d != axis) perm.push_back(d);
    x = x.Permute(perm);
    if (i < static_cast<int>(in_dirs.size()) && in_dirs[i] != 0) x = x.Flip({0});
    xs.push_back(x);
  }
  std::vector<OnnxValue> state;
  for (int i = 0; i < n_state; ++i) state.push_back(ctx.Raw(i));
  int n_out_scan = ctx.num_outputs() - n_state;
  if (n_out_scan < 0) return Invalid("fewer outputs than state variables");
  ASSIGN_OR_RETURN(auto scans, ScanLoop(ctx, *body, &state, xs, n_out_scan));
  for (int i = 0; i < n_state; ++i) ctx.SetValue(i, state[i]);
  for (int i = 0; i < n_out_scan; ++i) {
    if (i < static_cast<int>(out_dirs.size()) && out_dirs[i] != 0)
      std::reverse(scans[i].begin(), scans[i].end());
    ASSIGN_OR_RETURN(OnnxValue v, StackScan(ctx, scans[i]));
    int64_t axis = i < static_cast<int>(out_axes.size()) ? out_axes[i] : 0;
    if (axis != 0) {
      ASSIGN_OR_RETURN(axis, NormAxis(axis, v.tensor->ndim()));
      std::vector<int64_t> perm;
      for (int64_t d = 1; d <= axis; ++d) perm.push_back(d);
      perm.push_back(0);
      for (int64_t d = axis + 1; d < v.tensor->ndim(); ++d) perm.push_back(d);
      v.tensor = v.tensor->Permute(perm);
    }
    ctx.SetValue(n_state + i, v);
  }
  return absl::OkStatus();
}

// ---- sequences ----

OnnxValue Sequence(std::vector<OnnxValue> items, DType elem) {
  OnnxValue v;
  v.kind = OnnxValue::Kind::kSequence;
  v.items = std::move(items);
  v.elem_type = elem;
  return v;
}

absl::StatusOr<const OnnxValue*> SeqInput(const OpContext& ctx, int i) {
  if (!ctx.Has(i) || ctx.Raw(i).kind != OnnxValue::Kind::kSequence)
    return Invalid(absl::StrCat("input ", i, " is not a sequence"));
  return &ctx.Raw(i);
}

// Position input i (default `def`), normalized for a sequence of length n
// (insert positions may equal n).
absl::StatusOr<int64_t> Position(const OpContext& ctx, int i, int64_t n, int64_t def,
                                 bool allow_end) {
  if (!ctx.Has(i)) return def;
  ASSIGN_OR_RETURN(std::vector<int64_t> p, ctx.StaticInts(i));
  if (p.size() != 1) return Invalid("position must be a scalar");
  int64_t pos = p[0] < 0 ? p[0] + n : p[0];
  if (pos < 0 || pos > n || (pos == n && !allow_end))
    return Invalid(absl::StrCat("position ", p[0], " is out of range for length ", n));
  return pos;
}

absl::Status SequenceEmptyOp(OpContext& ctx) {
  std::optional<DType> t = DTypeFromOnnx(static_cast<int>(ctx.Int("dtype", 1)));
  if (!t) return Unsupported("unsupported sequence element type");
  ctx.SetValue(0, Sequence({}, *t));
  return absl::OkStatus();
}

absl::Status SequenceConstructOp(OpContext& ctx) {
  std::vector<OnnxValue> items;
  for (int i = 0; i < ctx.num_inputs(); ++i) items.push_back(ctx.Raw(i));
  ctx.SetValue(0, Sequence(items, items.empty() ? dtypes::kFloat32 : items[0].dtype()));
  return absl::OkStatus();
}

absl::Status SequenceAtOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 2));
  ASSIGN_OR_RETURN(const OnnxValue* s, SeqInput(ctx, 0));
  int64_t n = static_cast<int64_t>(s->items.size());
  ASSIGN_OR_RETURN(int64_t pos, Position(ctx, 1, n, 0, false));
  ctx.SetValue(0, s->items[pos]);
  return absl::OkStatus();
}

absl::Status SequenceInsertOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(2, 3));
  ASSIGN_OR_RETURN(const OnnxValue* s, SeqInput(ctx, 0));
  int64_t n = static_cast<int64_t>(s->items.size());
  ASSIGN_OR_RETURN(int64_t pos, Position(ctx, 2, n, n, true));
  std::vector<OnnxValue> items = s->items;
  items.insert(items.begin() + pos, ctx.Raw(1));
  ctx.SetValue(0, Sequence(items, s->elem_type));
  return absl::OkStatus();
}

absl::Status SequenceEraseOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 2));
  ASSIGN_OR_RETURN(const OnnxValue* s, SeqInput(ctx, 0));
  int64_t n = static_cast<int64_t>(s->items.size());
  if (n == 0) return Invalid("cannot erase from an empty sequence");
  ASSIGN_OR_RETURN(int64_t pos, Position(ctx, 1, n, n - 1, false));
  std::vector<OnnxValue> items = s->items;
  items.erase(items.begin() + pos);
  ctx.SetValue(0, Sequence(items, s->elem_type));
  return absl::OkStatus();
}

absl::Status SequenceLengthOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(const OnnxValue* s, SeqInput(ctx, 0));
  ctx.SetHost(0, HostTensor::FromInt64s({static_cast<int64_t>(s->items.size())}, {}));
  return absl::OkStatus();
}

absl::Status SplitToSequenceOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 2));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 0), x.ndim()));
  int64_t n = x.dim(static_cast<int>(axis));
  std::vector<int64_t> sizes;
  bool squeeze = false;
  int64_t keepdims = ctx.Int("keepdims", 1);  // only used without `split`
  auto too_many = [&](int64_t pieces) {
    return absl::ResourceExhaustedError(absl::StrCat("splitting ", n, " elements into ", pieces,
                                                     " pieces is too many (more than ",
                                                     kMaxSequenceLength, ")"));
  };
  if (ctx.Has(1)) {
    ASSIGN_OR_RETURN(HostTensor split, ctx.Static(1));
    if (split.ndim() == 0) {
      int64_t chunk = split.GetInt(0);
      if (chunk <= 0) return Invalid("split must be positive");
      int64_t pieces = n / chunk + (n % chunk != 0);
      if (pieces > kMaxSequenceLength) return too_many(pieces);
      for (int64_t done = 0; done < n; done += chunk) sizes.push_back(std::min(chunk, n - done));
    } else {
      if (split.numel() > kMaxSequenceLength) return too_many(split.numel());
      sizes = split.Int64s();
    }
  } else {
    if (n > kMaxSequenceLength) return too_many(n);
    sizes.assign(n, 1);
    squeeze = keepdims == 0;
  }
  std::vector<OnnxValue> items;
  for (Tensor& t : x.Split(sizes, axis))
    items.push_back(OnnxValue::FromTensor(squeeze ? t.Squeeze({axis}) : t));
  ctx.SetValue(0, Sequence(items, x.dtype()));
  return absl::OkStatus();
}

absl::Status ConcatFromSequenceOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  ASSIGN_OR_RETURN(const OnnxValue* s, SeqInput(ctx, 0));
  if (s->items.empty()) return Invalid("the sequence is empty");
  std::vector<Tensor> ts;
  for (const OnnxValue& v : s->items) {
    ASSIGN_OR_RETURN(Tensor t, AsTensor(ctx, v));
    ts.push_back(t);
  }
  bool new_axis = ctx.Int("new_axis", 0) != 0;
  int64_t rank = ts[0].ndim() + (new_axis ? 1 : 0);
  ASSIGN_OR_RETURN(int64_t axis, NormAxis(ctx.Int("axis", 0), rank));
  ctx.Set(0, new_axis ? Tensor::Stack(ts, axis) : Tensor::Cat(ts, axis));
  return absl::OkStatus();
}

absl::Status SequenceMapOp(OpContext& ctx) {
  const onnx::GraphProto* body = ctx.Graph("body");
  if (body == nullptr) return Invalid("missing body");
  ASSIGN_OR_RETURN(const OnnxValue* s, SeqInput(ctx, 0));
  size_t n = s->items.size();
  std::vector<std::vector<OnnxValue>> outs(ctx.num_outputs());
  for (size_t k = 0; k < n; ++k) {
    std::vector<OnnxValue> in;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const OnnxValue& v = ctx.Raw(i);
      if (v.kind == OnnxValue::Kind::kSequence) {
        if (v.items.size() != n) return Invalid("input sequences differ in length");
        in.push_back(v.items[k]);
      } else {
        in.push_back(v);
      }
    }
    ASSIGN_OR_RETURN(std::vector<OnnxValue> out,
                     ctx.builder()->RunSubgraph(*body, in, ctx.builder()->current_scope()));
    for (int i = 0; i < ctx.num_outputs() && i < static_cast<int>(out.size()); ++i)
      outs[i].push_back(out[i]);
  }
  for (int i = 0; i < ctx.num_outputs(); ++i)
    ctx.SetValue(i, Sequence(outs[i], outs[i].empty() ? dtypes::kFloat32 : outs[i][0].dtype()));
  return absl::OkStatus();
}

// ---- optionals ----

absl::Status OptionalOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(0, 1));
  (void)ctx.HasAttr("type");  // the element type of an empty optional
  OnnxValue v;
  v.kind = OnnxValue::Kind::kOptional;
  if (ctx.Has(0)) v.items.push_back(ctx.Raw(0));
  ctx.SetValue(0, v);
  return absl::OkStatus();
}

absl::Status OptionalHasElementOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(0, 1));
  bool has = ctx.Has(0) && (ctx.Raw(0).kind != OnnxValue::Kind::kOptional ||
                            !ctx.Raw(0).items.empty());
  ctx.SetHost(0, HostTensor::FromInt64s({has}, {}, dtypes::kBool));
  return absl::OkStatus();
}

absl::Status OptionalGetElementOp(OpContext& ctx) {
  RETURN_IF_ERROR(ctx.CheckInputs(1, 1));
  const OnnxValue& v = ctx.Raw(0);
  if (v.kind != OnnxValue::Kind::kOptional) {
    ctx.SetValue(0, v);
    return absl::OkStatus();
  }
  if (v.items.empty()) return Invalid("the optional is empty");
  ctx.SetValue(0, v.items[0]);
  return absl::OkStatus();
}

}  // namespace

void RegisterControlOps(OpRegistry* r) {
  r->Register("If", IfOp);
  r->Register("Loop", LoopOp);
  r->Register("Scan", ScanOp);
  r->Register("SequenceEmpty", SequenceEmptyOp);
  r->Register("SequenceConstruct", SequenceConstructOp);
  r->Register("SequenceAt", SequenceAtOp);
  r->Register("SequenceInsert", SequenceInsertOp);
  r->Register("SequenceErase", SequenceEraseOp);
  r->Register("SequenceLength", SequenceLengthOp);
  r->Register("SplitToSequence", SplitToSequenceOp);
  r->Register("ConcatFromSequence", ConcatFromSequenceOp);
  r->Register("SequenceMap", SequenceMapOp);
  r->Register("Optional", OptionalOp);
  r->Register("OptionalHasElement", OptionalHasElementOp);
  r->Register("OptionalGetElement", OptionalGetElementOp);
}

}  // namespace kiln
