// Recurrent layers: RNN, GRU, LSTM, unrolled over the (static) sequence
// length at graph-build time. The input projections of all time steps are
// one matmul; each step adds the recurrent matmul and the gate math.
// sequence_lens freezes the state of finished sequences and zeroes their Y.
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
  int64_t seq = x.dim(0), batch = x.dim(1);
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
    const Act& f = acts[d * per_dir];
    const Act& g = acts[d * per_dir + (per_dir > 1 ? 1 : 0)];
    const Act& hact = acts[d * per_dir + (per_dir > 2 ? 2 : 0)];
    // Input projections of all steps: (seq, batch, G * hidden).
    Tensor xw = x.Matmul(wd.Transpose()) + wb;
    std::vector<Tensor> ys(seq);
    auto clipped = [&](const Tensor& v) { return clip > 0 ? v.Clip(-clip, clip) : v; };
    for (int64_t step = 0; step < seq; ++step) {
      int64_t ti = reverse ? seq - 1 - step : step;
      Tensor xt = xw.Shrink({{ti, ti + 1}, {0, batch}, {0, gates * hidden}}).Reshape({batch, gates * hidden});
      Tensor hr = h.Matmul(rd.Transpose());  // (batch, G * hidden)
      Tensor h_new, c_new = c;
      if (cell == Cell::kRnn) {
        h_new = f(clipped(xt + hr + rb));
      } else if (cell == Cell::kGru) {
        Tensor z = f(clipped(Gate(xt, 0, hidden) + Gate(hr, 0, hidden) + Gate(rb, 0, hidden)));
        Tensor rg = f(clipped(Gate(xt, 1, hidden) + Gate(hr, 1, hidden) + Gate(rb, 1, hidden)));
        Tensor rh = rd.Shrink({{2 * hidden, 3 * hidden}, {0, hidden}}).Transpose();  // Rh^T
        Tensor cand;
        if (ctx.Int("linear_before_reset", 0) != 0) {
          cand = Gate(xt, 2, hidden) + rg * (h.Matmul(rh) + Gate(rb, 2, hidden));
        } else {
          cand = Gate(xt, 2, hidden) + (rg * h).Matmul(rh) + Gate(rb, 2, hidden);
        }
        Tensor hc = g(clipped(cand));
        h_new = (z.Scalar(1) - z) * hc + z * h;
      } else {
        auto pre = [&](int i) { return Gate(xt, i, hidden) + Gate(hr, i, hidden) + Gate(rb, i, hidden); };
        auto peephole = [&](int i) {
          return peep ? peep->Shrink({{d, d + 1}, {i * hidden, (i + 1) * hidden}}).Reshape({hidden})
                      : zeros.Shrink({{0, 1}, {0, hidden}}).Reshape({hidden});
        };
        Tensor ig = f(clipped(pre(0) + peephole(0) * c));
        Tensor fg = f(clipped(pre(2) + peephole(2) * c));
        Tensor cc = g(clipped(pre(3)));
        c_new = fg * c + ig * cc;
        Tensor og = f(clipped(pre(1) + peephole(1) * c_new));
        h_new = og * hact(c_new);
      }
      if (seq_lens) {
        Tensor live = seq_lens->Cast(dtypes::kInt64).Gt(seq_lens->Cast(dtypes::kInt64).Scalar(ti))
                          .Reshape({batch, 1});
        h = Tensor::Where(live, h_new, h);
        c = Tensor::Where(live, c_new, c);
        ys[ti] = Tensor::Where(live, h_new, zeros);
      } else {
        h = h_new;
        c = c_new;
        ys[ti] = h_new;
      }
    }
    y_dirs.push_back(Tensor::Stack(ys, 0));  // (seq, batch, hidden)
    h_dirs.push_back(h);
    c_dirs.push_back(c);
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
