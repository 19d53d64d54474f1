// Recurrent layers: RNN, GRU, LSTM over the (static) sequence length.
// The input projections of all time steps are one matmul. Then the steps
// run one after the other while the graph is built: step t reads row t of
// the projections and row t -/+ 1 of Y through views at a bound variable
// (Tensor::ShrinkAt) and writes its state in place and its h into row t of
// Y (Tensor::Assign), so every step runs the same few kernels (compiled
// once; a JIT capture replays them with the step's variable values) and the
// graph never grows with the sequence.
// With sequence_lens (finished sequences freeze their state and get zeros in
// Y) the steps are unrolled into one lazy graph instead.
#include <optional>

#include "engine/onnx/ops_common.h"

namespace kiln {
namespace {

enum class Cell { kRnn, kGru, kLstm };

using Act = std::function<Tensor(const Tensor&)>;

absl::StatusOr<Act> MakeAct(const std::string& name, float alpha, float beta) {
  if (name == "Tanh") return Act([](const Tensor& x) { return x.Tanh(); });
  if (name == "Sigmoid") return Act([](const Tensor& x) { return x.Sigmoid(); });
  if (name == "Relu") return Act([](const Tensor& x) { return x.Relu(); });
  if (name == "Affine") return Act([=](const Tensor& x) { return x * alpha + beta; });
  if (name == "LeakyRelu") return Act([=](const Tensor& x) { return x.LeakyRelu(alpha); });
  if (name == "ThresholdedRelu")
    return Act([=](const Tensor& x) {
      return Tensor::Where(x.Gt(x.Scalar(alpha)), x, x.ZerosLike());
    });
  if (name == "ScaledTanh") return Act([=](const Tensor& x) { return (x * beta).Tanh() * alpha; });
  if (name == "HardSigmoid") return Act([=](const Tensor& x) { return x.HardSigmoid(alpha, beta); });
  if (name == "Elu") return Act([=](const Tensor& x) { return x.Elu(alpha); });
  if (name == "Softsign") return Act([](const Tensor& x) { return x / (x.Abs() + 1.0); });
  if (name == "Softplus") return Act([](const Tensor& x) { return x.Softplus(); });
  return Unsupported(absl::StrCat("activation '", name, "' is not supported"));
}

// Columns [i * h, (i + 1) * h) of a (..., G * h) tensor.
Tensor Gate(const Tensor& t, int64_t i, int64_t h) {
  std::vector<Tensor::Slice> s(t.ndim());
  s[t.ndim() - 1] = Tensor::Slice{i * h, (i + 1) * h, 1};
  return t.Slices(s);
}

struct Cell3 {
  Act f, g, h;  // gate, candidate and output activations
};

// One direction's cell: weights and settings.
struct Steps {
  Cell cell;
  int64_t hidden;
  double clip;
  bool linear_before_reset;
  Cell3 act;
  Tensor rd;           // R of this direction: (G * hidden, hidden)
  Tensor rb;           // its recurrence bias: (G * hidden)
  const Tensor* peep;  // LSTM peepholes (3 * hidden) or null
  std::optional<Tensor> r_panels;  // R^T in panels (WeightPanels), where they pay

  // h's recurrent projection h R^T + Rb: (batch, G * hidden).
  Tensor Recur(const Tensor& h) const {
    return (r_panels ? h.MatmulPanels(*r_panels, rd.dim(0)) : h.Matmul(rd.Transpose())) + rb;
  }
  Tensor Clipped(const Tensor& v) const { return clip > 0 ? v.Clip(-clip, clip) : v; }
  Tensor Peep(int i, const Tensor& like) const {
    return peep ? peep->Shrink({{i * hidden, (i + 1) * hidden}}) : like.ZerosLike();
  }
};

// An LSTM's new cell state from the old one.
Tensor LstmState(const Steps& s, const Tensor& xt, const Tensor& xr, const Tensor& c) {
  int64_t n = s.hidden;
  auto pre = [&](int i) { return Gate(xt, i, n) + Gate(xr, i, n); };
  Tensor ig = s.act.f(s.Clipped(pre(0) + s.Peep(0, c) * c));
  Tensor fg = s.act.f(s.Clipped(pre(2) + s.Peep(2, c) * c));
  Tensor cc = s.act.g(s.Clipped(pre(3)));
  return fg * c + ig * cc;
}

// An LSTM's h from its new cell state.
Tensor LstmOut(const Steps& s, const Tensor& xt, const Tensor& xr, const Tensor& c_new) {
  int64_t n = s.hidden;
  Tensor og = s.act.f(s.Clipped(Gate(xt, 1, n) + Gate(xr, 1, n) + s.Peep(1, c_new) * c_new));
  return og * s.act.h(c_new);
}

// The step from (xt, h) (and the LSTM cell state c): returns the new h and,
// for an LSTM, the new c in *c_new. `xr` is h's recurrent projection
// h R^T + Rb (batch, G * hidden), realized or not.
Tensor CellMath(const Steps& s, const Tensor& xt, const Tensor& xr, const Tensor& h,
                const Tensor& c, Tensor* c_new) {
  int64_t n = s.hidden;
  if (s.cell == Cell::kRnn) return s.act.f(s.Clipped(xt + xr));
  if (s.cell == Cell::kGru) {
    Tensor z = s.act.f(s.Clipped(Gate(xt, 0, n) + Gate(xr, 0, n)));
    Tensor rg = s.act.f(s.Clipped(Gate(xt, 1, n) + Gate(xr, 1, n)));
    Tensor cand;
    if (s.linear_before_reset) {
      cand = Gate(xt, 2, n) + rg * Gate(xr, 2, n);
    } else {
      Tensor rh = s.rd.Shrink({{2 * n, 3 * n}, {0, n}}).Transpose();  // Rh^T
      cand = Gate(xt, 2, n) + (rg * h).Matmul(rh) + Gate(s.rb, 2, n);
    }
    Tensor hc = s.act.g(s.Clipped(cand));
    return (z.Scalar(1) - z) * hc + z * h;
  }
  *c_new = LstmState(s, xt, xr, c);
  return LstmOut(s, xt, xr, *c_new);
}

// Steps run one after the other, each the same kernels on other rows (see
// the file comment). Appends Y (seq, batch, hidden), the last h and c.
absl::Status Stepwise(const Steps& s, Tensor xw, bool reverse, const Tensor& h0,
                      const Tensor& c0, std::vector<Tensor>* ys, std::vector<Tensor>* hs,
                      std::vector<Tensor>* cs) {
  const int64_t seq = xw.dim(0), batch = xw.dim(1), n = s.hidden, gn = xw.dim(2);
  RETURN_IF_ERROR(xw.Realize());
  Tensor y = Tensor::Empty(xw.engine(), {seq, batch, n}, xw.dtype(), xw.device());
  RETURN_IF_ERROR(y.Realize());
  // The LSTM cell state, updated in place (a buffer of its own).
  Tensor c = (c0 + 0.0).Contiguous();
  RETURN_IF_ERROR(c.Realize());
  if (seq == 0) {
    ys->push_back(y);
    hs->push_back(h0);
    cs->push_back(c);
    return absl::OkStatus();
  }
  UOpRef now = UOp::Variable("rnn_t", 0, seq - 1), before = UOp::Variable("rnn_tp", 0, seq - 1);
  int64_t last = 0;
  for (int64_t step = 0; step < seq; ++step) {
    int64_t ti = reverse ? seq - 1 - step : step;
    Tensor xt = xw.ShrinkAt(0, UOp::Bind(now, ti), 1).Reshape({batch, gn});
    Tensor h = step == 0 ? h0 : y.ShrinkAt(0, UOp::Bind(before, last), 1).Reshape({batch, n});
    Tensor xr = s.Recur(h);
    // The recurrent projection feeds several gates: one kernel, then the
    // gate math reads it (an RNN's single gate fuses into its one kernel).
    if (s.cell != Cell::kRnn) RETURN_IF_ERROR(xr.Realize());
    Tensor h_new;
    if (s.cell == Cell::kLstm) {
      // The state in place (each element read where it is written), then h
      // from the buffer that now holds the new state.
      RETURN_IF_ERROR(c.Assign(LstmState(s, xt, xr, c)));
      h_new = LstmOut(s, xt, xr, c);
    } else {
      Tensor unused;
      h_new = CellMath(s, xt, xr, h, c, &unused);
    }
    RETURN_IF_ERROR(y.ShrinkAt(0, UOp::Bind(now, ti), 1).Reshape({batch, n}).Assign(h_new));
    last = ti;
  }
  ys->push_back(y);
  hs->push_back(y.Shrink({{last, last + 1}, {0, batch}, {0, n}}).Reshape({batch, n}));
  cs->push_back(c);
  return absl::OkStatus();
}

// All steps as one lazy graph, for sequence_lens: a finished sequence keeps
// its state and gets zeros in Y.
absl::Status Unrolled(const Steps& s, const Tensor& xw, const Tensor& seq_lens, bool reverse,
                      Tensor h, Tensor c, const Tensor& zeros, std::vector<Tensor>* ys,
                      std::vector<Tensor>* hs, std::vector<Tensor>* cs) {
  const int64_t seq = xw.dim(0), batch = xw.dim(1), gn = xw.dim(2);
  std::vector<Tensor> out(seq);
  Tensor lens = seq_lens.Cast(dtypes::kInt64);
  for (int64_t step = 0; step < seq; ++step) {
    int64_t ti = reverse ? seq - 1 - step : step;
    Tensor xt = xw.Shrink({{ti, ti + 1}, {0, batch}, {0, gn}}).Reshape({batch, gn});
    Tensor c_new = c;
    Tensor h_new = CellMath(s, xt, s.Recur(h), h, c, &c_new);
    Tensor live = lens.Gt(lens.Scalar(ti)).Reshape({batch, 1});
    h = Tensor::Where(live, h_new, h);
    c = Tensor::Where(live, c_new, c);
    out[ti] = Tensor::Where(live, h_new, zeros);
  }
  ys->push_back(Tensor::Stack(out, 0));
  hs->push_back(h);
  cs->push_back(c);
  return absl::OkStatus();
}

absl::Status RecurrentOp(OpContext& ctx, Cell cell) {
  const int gates = cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4;
  RETURN_IF_ERROR(ctx.CheckInputs(3, cell == Cell::kLstm ? 8 : 6));
  ASSIGN_OR_RETURN(Tensor x, ctx.In(0));
  ASSIGN_OR_RETURN(Tensor w, ctx.In(1));
  ASSIGN_OR_RETURN(Tensor r, ctx.In(2));
  int64_t hidden = ctx.Int("hidden_size", 0);
  bool batch_first = ctx.Int("layout", 0) != 0;
  std::string direction = ctx.Str("direction", "forward");
  int dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return Invalid(absl::StrCat("unknown direction '", direction, "'"));
  if (x.ndim() != 3 || w.ndim() != 3 || r.ndim() != 3) return Invalid("X, W and R must be 3-D");
  if (batch_first) x = x.Permute({1, 0, 2});
  const int64_t batch = x.dim(1);
  if (hidden <= 0) hidden = r.dim(2);
  if (w.dim(0) != dirs || w.dim(1) != gates * hidden || r.dim(1) != gates * hidden ||
      r.dim(2) != hidden || w.dim(2) != x.dim(2))
    return Invalid("W / R shapes do not match hidden_size, direction and the input");
  if (ctx.Int("input_forget", 0) != 0) return Unsupported("input_forget is not supported");
  double clip = ctx.Float("clip", 0.0f);
  // Activations: defaults per cell, one list for all directions.
  std::vector<std::string> names = ctx.Strs("activations");
  std::vector<float> alphas = ctx.Floats("activation_alpha"), betas = ctx.Floats("activation_beta");
  std::vector<std::string> defaults = cell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
                                      : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                           : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  size_t per_dir = defaults.size();
  std::vector<Act> acts;
  for (size_t i = 0; i < per_dir * dirs; ++i) {
    std::string n = i < names.size() ? names[i] : defaults[i % per_dir];
    float a = i < alphas.size() ? alphas[i] : (n == "LeakyRelu" ? 0.01f : n == "HardSigmoid" ? 0.2f : 1.0f);
    float b = i < betas.size() ? betas[i] : (n == "HardSigmoid" ? 0.5f : 0.0f);
    ASSIGN_OR_RETURN(Act act, MakeAct(n, a, b));
    acts.push_back(act);
  }
  std::optional<Tensor> bias, seq_lens, h0, c0, peep;
  auto check = [&](const std::optional<Tensor>& t, Shape want, const char* name) {
    if (t && t->shape() != want)
      return Invalid(absl::StrCat(name, " has the wrong shape"));
    return absl::OkStatus();
  };
  if (ctx.Has(3)) {
    ASSIGN_OR_RETURN(bias, ctx.In(3));
  }
  if (ctx.Has(4)) {
    ASSIGN_OR_RETURN(seq_lens, ctx.In(4));
  }
  if (ctx.Has(5)) {
    ASSIGN_OR_RETURN(h0, ctx.In(5));
    if (batch_first) h0 = h0->Permute({1, 0, 2});
  }
  if (cell == Cell::kLstm && ctx.Has(6)) {
    ASSIGN_OR_RETURN(c0, ctx.In(6));
    if (batch_first) c0 = c0->Permute({1, 0, 2});
  }
  if (cell == Cell::kLstm && ctx.Has(7)) {
    ASSIGN_OR_RETURN(peep, ctx.In(7));
  }
  RETURN_IF_ERROR(check(bias, {dirs, 2 * gates * hidden}, "B"));
  RETURN_IF_ERROR(check(seq_lens, {batch}, "sequence_lens"));
  RETURN_IF_ERROR(check(h0, {dirs, batch, hidden}, "initial_h"));
  RETURN_IF_ERROR(check(c0, {dirs, batch, hidden}, "initial_c"));
  RETURN_IF_ERROR(check(peep, {dirs, 3 * hidden}, "P"));
  DType t = x.dtype();
  Tensor zeros = Tensor::Zeros(ctx.engine(), {batch, hidden}, t, ctx.device());
  std::vector<Tensor> y_dirs, h_dirs, c_dirs;
  for (int d = 0; d < dirs; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    Tensor wd = w.Shrink({{d, d + 1}, {0, w.dim(1)}, {0, w.dim(2)}}).Reshape({w.dim(1), w.dim(2)});
    Tensor rd = r.Shrink({{d, d + 1}, {0, r.dim(1)}, {0, r.dim(2)}}).Reshape({r.dim(1), r.dim(2)});
    Tensor wb = Tensor::Zeros(ctx.engine(), {gates * hidden}, t, ctx.device()), rb = wb;
    if (bias) {
      Tensor bd = bias->Shrink({{d, d + 1}, {0, bias->dim(1)}}).Reshape({2 * gates * hidden});
      wb = bd.Shrink({{0, gates * hidden}});
      rb = bd.Shrink({{gates * hidden, 2 * gates * hidden}});
    }
    Tensor h = h0 ? h0->Shrink({{d, d + 1}, {0, batch}, {0, hidden}}).Reshape({batch, hidden}) : zeros;
    Tensor c = c0 ? c0->Shrink({{d, d + 1}, {0, batch}, {0, hidden}}).Reshape({batch, hidden}) : zeros;
    Cell3 acts3{acts[d * per_dir], acts[d * per_dir + (per_dir > 1 ? 1 : 0)],
                acts[d * per_dir + (per_dir > 2 ? 2 : 0)]};
    // Input projections of all steps: (seq, batch, G * hidden); from panels
    // of W like a Gemm's transposed weight (PanelMatmul).
    std::optional<Tensor> xp = PanelMatmul(ctx, x, wd, true, absl::StrCat("/dir", d));
    Tensor xw = (xp ? *xp : x.Matmul(wd.Transpose())) + wb;
    Tensor peep_d;
    if (peep) peep_d = peep->Shrink({{d, d + 1}, {0, 3 * hidden}}).Reshape({3 * hidden});
    // Each step multiplies (batch, hidden) by R^T: from panels, as a Gemm
    // would, where they pay (LSTM-1000 at batch 8: a step's dot products
    // along R's rows ran at 83 GFLOP/s; the model 151 -> 78 ms).
    Steps st{cell, hidden, clip, ctx.Int("linear_before_reset", 0) != 0, acts3, rd, rb,
             peep ? &peep_d : nullptr,
             WeightPanels(ctx, batch, rd, true, absl::StrCat("/dir", d), 2)};
    if (seq_lens) {
      RETURN_IF_ERROR(Unrolled(st, xw, *seq_lens, reverse, h, c, zeros, &y_dirs, &h_dirs, &c_dirs));
    } else {
      RETURN_IF_ERROR(Stepwise(st, xw, reverse, h, c, &y_dirs, &h_dirs, &c_dirs));
    }
  }
  Tensor y = Tensor::Stack(y_dirs, 1);   // (seq, dirs, batch, hidden)
  Tensor yh = Tensor::Stack(h_dirs, 0);  // (dirs, batch, hidden)
  Tensor yc = Tensor::Stack(c_dirs, 0);
  if (batch_first) {
    y = y.Permute({2, 0, 1, 3});
    yh = yh.Permute({1, 0, 2});
    yc = yc.Permute({1, 0, 2});
  }
  if (ctx.Wants(0)) ctx.Set(0, y);
  if (ctx.Wants(1)) ctx.Set(1, yh);
  if (cell == Cell::kLstm && ctx.Wants(2)) ctx.Set(2, yc);
  return absl::OkStatus();
}

}  // namespace

void RegisterRnnOps(OpRegistry* r) {
  r->Register("RNN", [](OpContext& ctx) { return RecurrentOp(ctx, Cell::kRnn); });
  r->Register("GRU", [](OpContext& ctx) { return RecurrentOp(ctx, Cell::kGru); });
  r->Register("LSTM", [](OpContext& ctx) { return RecurrentOp(ctx, Cell::kLstm); });
}

}  // namespace kiln
