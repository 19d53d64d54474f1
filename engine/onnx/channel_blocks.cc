#include "engine/onnx/channel_blocks.h"

#include <algorithm>
#include <functional>
#include <set>

#include "engine/onnx/host_tensor.h"
#include "engine/onnx/onnx/onnx.pb.h"

namespace kiln {

namespace {
constexpr int64_t kB = Tensor::kChannelBlock;

int64_t Padded(int64_t channels) { return (channels + kB - 1) / kB * kB; }

// `t` (N, C, ...) with its channels padded with `value` to whole blocks.
Tensor PadChannels(const Tensor& t, double value) {
  const int64_t c = t.shape()[1], extra = Padded(c) - c;
  if (extra == 0) return t;
  Pads p(t.ndim(), {0, 0});
  p[1] = {0, extra};
  return t.Pad(p, value);
}

// A tensor of (at most 4-D, right-aligned) shape `s` that broadcasts to
// (N, C, H, W) = `full`, seen in blocks that broadcast to (N, C' / 16, H,
// W, 16) (C' = C rounded up to whole blocks): a per-channel operand is
// padded with 1 and reshaped, a scalar reshaped, a whole map padded with 0
// and viewed in blocks. The padded lanes stay finite, whatever the op.
std::optional<Tensor> InBlocks(const Tensor& t, const Shape& full) {
  Shape s = t.shape();
  if (s.size() > 4) return std::nullopt;
  s.insert(s.begin(), 4 - s.size(), 1);
  for (int i = 0; i < 4; ++i)
    if (s[i] != 1 && s[i] != full[i]) return std::nullopt;
  if (s[1] == 1) return t.Reshape({s[0], 1, s[2], s[3], 1});
  if (s[2] == 1 && s[3] == 1)
    return PadChannels(t.Reshape(s), 1.0).Reshape({s[0], Padded(s[1]) / kB, 1, 1, kB});
  return PadChannels(t.Reshape(s), 0.0).ToChannelBlocks();
}
}  // namespace

OnnxValue BlockedValue(const Tensor& blocked, int64_t channels) {
  const Shape& s = blocked.shape();
  const bool pooled = s.size() == 5 && s[2] == 1 && s[3] == 1;  // (N, C, 1, 1) in memory
  Tensor nchw = pooled ? blocked.Reshape({s[0], s[1] * kB, 1, 1}) : blocked.FromChannelBlocks();
  if (channels < nchw.shape()[1]) {  // the padded channels are not the value's
    Pads keep;
    for (int64_t d : nchw.shape()) keep.push_back({0, d});
    keep[1].second = channels;
    nchw = nchw.Shrink(keep);
  }
  if (!pooled) nchw = nchw.Contiguous();
  OnnxValue v = OnnxValue::FromTensor(std::move(nchw));
  v.blocked = blocked;
  return v;
}

Tensor CopyIntoBlocks(const Tensor& x) {
  // A computed input is stored in NCHW first: the copy into blocks reads
  // across channel planes, lane by lane, and would compute each element
  // there (DenseNet's BatchNorm + ReLU of a concatenation of 24 parts:
  // 1.96 ms for 1024 x 14 x 14, against 43 + 27 us in two copies).
  return PadChannels(x.Stored() ? x : x.Contiguous(), 0.0).ToChannelBlocks().Contiguous();
}

bool BlockablePointwise(const Shape& x, const Shape& w, const Tensor::ConvOptions& o) {
  if (x.size() != 4 || w.size() != 4 || w[2] != 1 || w[3] != 1 || o.groups != 1 || w[1] != x[1])
    return false;
  for (const std::vector<int64_t>* v : {&o.stride, &o.dilation})
    for (int64_t s : *v)
      if (s != 1) return false;
  for (const auto& [p0, p1] : o.padding)
    if (p0 != 0 || p1 != 0) return false;
  return x[1] % kB == 0 && w[0] % kB == 0;  // (a chain's later layers may pad)
}

bool WastesLanes(const Shape& x) {
  constexpr int64_t kRow = 32;  // two-vector tile rows of the NCHW kernel
  if (x.size() != 4) return false;
  const int64_t pixels = x[2] * x[3];
  if (pixels < 1) return false;
  const int64_t padded = (pixels + kRow - 1) / kRow * kRow;
  if ((padded - pixels) * 10 < padded) return false;
  bool tiles = false;
  for (int64_t t : {8, 7, 6, 5, 4}) tiles |= x[3] % t == 0;
  return tiles;
}

namespace {
const onnx::AttributeProto* Attr(const onnx::NodeProto& n, const std::string& name) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// Whether Conv node `n` reading `channels` channels (negative: unknown, a
// concatenation's) runs in blocks (ops_nn.cc: ChannelBlockedConv), judged
// from its weight's shape and its attributes.
bool BlockedConvReader(const onnx::NodeProto& n, const Scope& scope, int64_t channels) {
  if (n.input_size() < 2) return false;
  const OnnxValue* w = scope.Find(n.input(1));
  if (w == nullptr || !w->is_tensor()) return false;
  const Shape ws = w->shape();
  if (ws.size() != 4) return false;
  const onnx::AttributeProto* g = Attr(n, "group");
  const int64_t groups = g ? g->i() : 1;
  if (groups > 1 && groups == ws[0] && ws[1] == 1) return channels < 0 || channels == groups;
  return groups == 1 && (channels < 0 || ws[1] == channels);  // dense, any window
}

// Whether node `n` is a Concat along the channels of 4-D values.
bool ConcatenatesChannels(const onnx::NodeProto& n) {
  const onnx::AttributeProto* a = Attr(n, "axis");
  return n.op_type() == "Concat" && a != nullptr && (a->i() == 1 || a->i() == -3);
}

// Whether Pad node `n` pads only the spatial dims of 4-D values with a
// constant, as far as its constant inputs are known yet (a pads input
// computed by a later Constant node is taken on trust: PadOp keeps the
// blocks only when it holds).
bool PadsSpatially(const onnx::NodeProto& n, const Scope& scope) {
  const onnx::AttributeProto* mode = Attr(n, "mode");
  if (n.op_type() != "Pad" || (mode != nullptr && mode->s() != "constant") || n.input_size() > 3)
    return false;
  std::vector<int64_t> pads;
  if (const onnx::AttributeProto* a = Attr(n, "pads")) pads.assign(a->ints().begin(), a->ints().end());
  if (n.input_size() > 1) {
    const OnnxValue* v = scope.Find(n.input(1));
    if (v != nullptr && v->host)
      for (int64_t i = 0; i < v->host->numel(); ++i)
        pads.push_back(static_cast<int64_t>(v->host->GetDouble(i)));
  }
  if (pads.empty()) return true;
  return pads.size() == 8 && pads[0] == 0 && pads[1] == 0 && pads[4] == 0 && pads[5] == 0;
}

// `convs`: how many blocked convolutions deep the chain is followed (a
// chain that reaches an op outside it one convolution later pays a copy
// there: RegNet's 1x1 convolutions feeding grouped 3x3 ones, 15% slower).
bool Continues(const std::string& name, const Scope& scope, int64_t channels, int depth,
               int convs) {
  const std::vector<const onnx::NodeProto*>* readers = scope.ReadersOf(name);
  if (readers == nullptr || readers->empty() || depth > 12) return false;
  for (const onnx::NodeProto* r : *readers) {
    if (r == nullptr) return false;  // a graph output
    const std::string& op = r->op_type();
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") continue;
    // Pools and batch norms keep the blocks; so does a concatenation along
    // the channels (its other parts computed in blocks or copied in).
    const bool keeps = op == "MaxPool" || op == "AveragePool" ||
                       ((op == "BatchNormalization" || op == "Pad") && r->input(0) == name &&
                        (op != "Pad" || PadsSpatially(*r, scope)));
    if ((keeps || ConcatenatesChannels(*r)) && r->output_size() == 1 &&
        Continues(r->output(0), scope, keeps ? channels : -1, depth + 1, convs))
      continue;
    if (op == "Conv" && r->input_size() > 0 && r->input(0) == name &&
        BlockedConvReader(*r, scope, channels)) {
      if (convs == 0) continue;
      const int64_t out = scope.Find(r->input(1))->shape()[0];
      if (r->output_size() < 1 || !Continues(r->output(0), scope, out, depth + 1, convs - 1))
        return false;
      continue;
    }
    if (!BlockedElementwise(op) || r->output_size() < 1 ||
        !Continues(r->output(0), scope, channels, depth + 1, convs))
      return false;
  }
  return true;
}
}  // namespace

std::optional<OnnxValue> ConcatInBlocks(const std::vector<const OnnxValue*>& parts,
                                        const std::function<bool()>& continues) {
  int64_t total = 0;
  bool all = true, any = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const OnnxValue* v = parts[i];
    if (v == nullptr || !v->tensor || v->tensor->ndim() != 4 ||
        v->tensor->dtype() != dtypes::kFloat32)
      return std::nullopt;
    const int64_t c = v->tensor->shape()[1];
    // Only the last part may end in a partial block (its padded lanes are
    // the result's).
    if (c < 1 || (i + 1 < parts.size() && c % kB != 0)) return std::nullopt;
    total += c;
    any |= v->blocked.has_value();
    all &= v->blocked.has_value();
  }
  if (!any || (!all && !continues())) return std::nullopt;
  if (parts.size() == 1) return *parts[0];
  std::vector<Tensor> blocks;
  for (const OnnxValue* v : parts) blocks.push_back(v->blocked ? *v->blocked : CopyIntoBlocks(*v->tensor));
  Tensor cat = Tensor::Cat(blocks, 1);
  if (!cat.ok()) return std::nullopt;
  return BlockedValue(cat, total);
}

Tensor PerChannelInBlocks(const Tensor& v, double pad) {
  const int64_t c = v.numel();
  return PadChannels(v.Reshape({1, c}), pad).Reshape({1, Padded(c) / kB, 1, 1, kB});
}

bool ChainContinues(const std::string& name, const Scope& scope, int64_t channels) {
  return Continues(name, scope, channels, 0, 1);
}

bool BlockedElementwise(const std::string& op_type) {
  static const std::set<std::string> kOps = {
      "Add",  "Sub",      "Mul",         "Div",       "Relu", "LeakyRelu", "PRelu",
      "Clip", "Sigmoid",  "HardSigmoid", "HardSwish", "Tanh", "Identity",  "Neg",
      "Max",  "Min",      "Sum",         "Mean",      "Elu",  "Selu",      "Softplus"};
  return kOps.count(op_type) > 0;
}

bool SubstituteChannelBlocks(const std::string& op_type,
                             const std::vector<const OnnxValue*>& inputs, Engine* engine,
                             const std::string& device, std::vector<OnnxValue>* storage,
                             std::vector<const OnnxValue*>* out, int64_t* channels) {
  // The shape every input broadcasts to (4-D, from a blocked input).
  std::optional<Shape> full;
  for (const OnnxValue* v : inputs) {
    if (v == nullptr || v->kind == OnnxValue::Kind::kNone) continue;
    if (!v->is_tensor()) return false;
    absl::StatusOr<Shape> b = full ? BroadcastShapes(*full, v->shape()) : v->shape();
    if (!b.ok()) return false;
    full = *b;
  }
  if (!full || full->size() != 4) return false;
  // A blocked input is read in its blocks when it has the output's
  // channels; one broadcast along them (a single channel) would pair its
  // padded lanes with the others' channels, so it is read like any tensor.
  auto in_own_blocks = [&](const OnnxValue* v) {
    return v != nullptr && v->blocked && v->tensor && v->tensor->ndim() == 4 &&
           v->tensor->shape()[1] == (*full)[1];
  };
  if (std::none_of(inputs.begin(), inputs.end(), in_own_blocks)) return false;
  // A division could make a padded lane infinite (1 / 0), and a 0 weight
  // would not cancel it: partial blocks stop at one.
  if (op_type == "Div" && (*full)[1] % kB != 0) return false;
  *channels = (*full)[1];
  storage->clear();
  storage->reserve(inputs.size());
  for (const OnnxValue* v : inputs) {
    if (in_own_blocks(v)) {
      storage->push_back(OnnxValue::FromTensor(*v->blocked));
      continue;
    }
    if (v == nullptr || v->kind == OnnxValue::Kind::kNone || (v->host && v->host->numel() == 1)) {
      storage->push_back(v == nullptr ? OnnxValue() : *v);
      continue;
    }
    Tensor t = v->tensor ? *v->tensor : v->host->ToTensor(engine, device);
    std::optional<Tensor> b = InBlocks(t, *full);
    if (!b || !b->ok()) return false;
    storage->push_back(OnnxValue::FromTensor(*b));
  }
  std::vector<const OnnxValue*> substituted;  // (`out` may be `inputs`)
  for (size_t i = 0; i < inputs.size(); ++i)
    substituted.push_back(inputs[i] ? &(*storage)[i] : nullptr);
  *out = std::move(substituted);
  return true;
}

}  // namespace kiln
