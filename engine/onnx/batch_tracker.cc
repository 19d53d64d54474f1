#include "engine/onnx/batch_tracker.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/onnx/graph_builder.h"
#include "onnx/onnx.pb.h"

namespace kiln {
namespace {

// How an operator treats the batch axis (axis 0 of a batched input).
enum class Rule {
  kElementwise,  // numpy broadcasting: constants must not reach axis 0
  kPerImage,     // input 0 batched, the rest weights (a convolution, a pool)
  kReshape,      // a row-major reinterpretation of input 0 keeping axis 0
  kTranspose,    // perm[0] == 0
  kAxis,         // an `axis` away from 0 (softmax, concat, split, ...)
  kReduce,       // `axes` without 0
  kSlice,        // Slice `axes` without 0
  kPad,          // no padding on axis 0
  kMatMul,       // the rows (or the stacked matrices) are the batch
  kGemm,         // A's rows are the batch
  kGather,       // data along another axis, or embedding rows for batched ids
  kShape,        // Shape / Size: the batch size, as data
};

struct Entry {
  Rule rule;
  // Inputs that are shapes or bounds (any state; the slice recomputes them).
  uint32_t shape_slots = 0;
  // kAxis: the axis when the attribute is absent (kNoDefault: required).
  int64_t default_axis = 0;
  bool all_data_batched = false;  // kAxis: every input batched (Concat)
};

constexpr int64_t kNoDefault = INT64_MIN;
constexpr int64_t kLastAxis = -1;

const std::map<std::string, Entry>& Table() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, Entry>;
    for (const char* op :
         {"Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitShift",
          "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Cast", "CastLike", "Ceil",
          "Celu", "Clip", "Cos", "Cosh", "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Floor",
          "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "IsInf",
          "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log", "Max", "Mean", "Min", "Mish", "Mod",
          "Mul", "Neg", "Not", "Or", "PRelu", "Pow", "Reciprocal", "Relu", "Round", "Selu",
          "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Sub",
          "Sum", "Tan", "Tanh", "ThresholdedRelu", "Where", "Xor"})
      (*t)[op] = {Rule::kElementwise};
    for (const char* op :
         {"AveragePool", "BatchNormalization", "Conv", "ConvTranspose", "DepthToSpace",
          "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "InstanceNormalization", "LRN",
          "LpPool", "MaxPool", "SpaceToDepth"})
      (*t)[op] = {Rule::kPerImage};
    // Resize's sizes (input 3) follow the batch size; its roi and scales are
    // constants (a scale that changed with it would move the samples).
    (*t)["Resize"] = {Rule::kPerImage, 0b1000};
    (*t)["Upsample"] = {Rule::kPerImage};
    for (const char* op : {"Flatten", "Reshape", "Squeeze", "Unsqueeze", "Expand"})
      (*t)[op] = {Rule::kReshape, 0b10};
    (*t)["Transpose"] = {Rule::kTranspose};
    // Softmax's default axis is 1 before opset 13 and -1 after: never 0.
    for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"})
      (*t)[op] = {Rule::kAxis, 0, kLastAxis};
    (*t)["LayerNormalization"] = {Rule::kAxis, 0, kLastAxis};
    (*t)["Concat"] = {Rule::kAxis, 0, kNoDefault, true};
    (*t)["Split"] = {Rule::kAxis, 0b10, 0};
    (*t)["ArgMax"] = {Rule::kAxis, 0, 0};
    (*t)["ArgMin"] = {Rule::kAxis, 0, 0};
    (*t)["TopK"] = {Rule::kAxis, 0, kLastAxis};
    for (const char* op : {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                           "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
                           "ReduceSumSquare"})
      (*t)[op] = {Rule::kReduce};
    // Slice bounds are constants: bounds from the batch size (x[:, n - 8:])
    // would select other elements in a slice of other size, at equal shapes.
    (*t)["Slice"] = {Rule::kSlice};
    (*t)["Pad"] = {Rule::kPad};
    (*t)["MatMul"] = {Rule::kMatMul};
    (*t)["Gemm"] = {Rule::kGemm};
    (*t)["Gather"] = {Rule::kGather};
    (*t)["Shape"] = {Rule::kShape};
    (*t)["Size"] = {Rule::kShape};
    return t;
  }();
  return *table;
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

// An integer list given by attribute `name` or by input `slot`.
enum class Known { kAbsent, kUnknown, kYes };
constexpr size_t kNoSlot = ~size_t{0};
Known IntsOf(const onnx::NodeProto& node, const std::vector<const OnnxValue*>& ins,
             const std::string& name, size_t slot, std::vector<int64_t>* v) {
  if (const onnx::AttributeProto* a = FindAttr(node, name)) {
    v->assign(a->ints().begin(), a->ints().end());
    return Known::kYes;
  }
  if (slot >= ins.size() || node.input(static_cast<int>(slot)).empty()) return Known::kAbsent;
  if (ins[slot] == nullptr || !ins[slot]->is_tensor() || !ins[slot]->host) return Known::kUnknown;
  *v = ins[slot]->host->Int64s();
  return Known::kYes;
}

int64_t Rank(const OnnxValue* v) { return static_cast<int64_t>(v->shape().size()); }

// `axis` normalized for `rank`; -1 when out of range.
int64_t Norm(int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  return a < 0 || a >= rank ? -1 : a;
}

bool HasZeroAxis(const std::vector<int64_t>& axes, int64_t rank) {
  for (int64_t a : axes)
    if (Norm(a, rank) <= 0) return true;  // axis 0, or out of range: refuse
  return false;
}

bool HasSubgraph(const onnx::NodeProto& node) {
  for (const onnx::AttributeProto& a : node.attribute())
    if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS)
      return true;
  return false;
}

}  // namespace

BatchTracker::BatchTracker(int64_t n, const std::vector<std::string>& batched) : n_(n) {
  for (const std::string& name : batched) state_[name] = State::kBatched;
}

BatchTracker::State BatchTracker::Of(const std::string& name) const {
  auto it = state_.find(name);
  return it == state_.end() ? State::kConst : it->second;
}

void BatchTracker::Observe(const onnx::NodeProto& node, const std::vector<const OnnxValue*>& ins,
                           const std::vector<const OnnxValue*>& outs) {
  if (!failure_.ok()) return;
  State s = State::kConst;
  absl::Status st = Judge(node, ins, outs, &s);
  if (!st.ok()) {
    failure_ = absl::FailedPreconditionError(
        absl::StrCat(NodeLabel(node), " mixes the images of a batch: ", st.message()));
    return;
  }
  auto bytes = [](const OnnxValue* v) {
    return static_cast<double>(v->tensor->numel()) * v->dtype().ItemSize();
  };
  if (s == State::kBatched)
    for (size_t i = 0; i < ins.size(); ++i)
      if (ins[i] != nullptr && ins[i]->is_tensor() && ins[i]->tensor &&
          Of(node.input(static_cast<int>(i))) == State::kConst)
        weight_bytes_[node.input(static_cast<int>(i))] = bytes(ins[i]);
  auto rule = Table().find(node.op_type());
  const bool view = node.op_type() == "Identity" ||
                    (rule != Table().end() && rule->second.rule == Rule::kReshape);
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    const OnnxValue* v = i < static_cast<int>(outs.size()) ? outs[i] : nullptr;
    state_[node.output(i)] = s;
    dependence_.erase(node.output(i));
    if (s == State::kSized && node.output_size() == 1) {
      // A shape vector whose batch-dependent elements are known: none
      // (the height of Shape(x)) is a constant.
      std::optional<std::vector<bool>> dep = Dependence(node, ins, v);
      if (dep && std::none_of(dep->begin(), dep->end(), [](bool b) { return b; }))
        state_[node.output(i)] = State::kConst;
      else if (dep)
        dependence_[node.output(i)] = std::move(*dep);
    }
    if (s != State::kBatched || v == nullptr || !v->is_tensor()) continue;
    const Shape shape = v->shape();
    image_shape_[node.output(i)] = Shape(shape.begin() + 1, shape.end());  // rank >= 1: Judge
    if (v->tensor && !view) image_bytes_[node.output(i)] = bytes(v) / static_cast<double>(n_);
  }
}

absl::Status BatchTracker::Judge(const onnx::NodeProto& node,
                                 const std::vector<const OnnxValue*>& ins,
                                 const std::vector<const OnnxValue*>& outs, State* out) const {
  std::vector<State> in_state;
  bool any_batched = false, any_sized = false;
  for (int i = 0; i < node.input_size(); ++i) {
    in_state.push_back(node.input(i).empty() ? State::kConst : Of(node.input(i)));
    any_batched |= in_state.back() == State::kBatched;
    any_sized |= in_state.back() == State::kSized;
  }
  if (HasSubgraph(node))
    return absl::FailedPreconditionError("a subgraph may read batched values");
  // A draw made once per slice would differ from the one draw of the batch.
  static const std::set<std::string> kRandom = {"Bernoulli", "Multinomial", "RandomNormal",
                                                "RandomNormalLike", "RandomUniform",
                                                "RandomUniformLike"};
  if (kRandom.count(node.op_type()))
    return absl::FailedPreconditionError("a random draw would be made once per slice");
  // (A Dropout in training mode would too; kiln refuses to build one.)
  if (!any_batched) {
    *out = any_sized ? State::kSized : State::kConst;
    return absl::OkStatus();
  }
  auto it = Table().find(node.domain().empty() || node.domain() == "ai.onnx" ? node.op_type()
                                                                              : std::string());
  if (it == Table().end()) return absl::FailedPreconditionError("no batch rule for this operator");
  const Entry& e = it->second;
  if (ins.size() != in_state.size()) return absl::FailedPreconditionError("inputs not all known");
  for (size_t i = 0; i < ins.size(); ++i)
    if (!node.input(i).empty() && (ins[i] == nullptr || !ins[i]->is_tensor()))
      return absl::FailedPreconditionError("an input that is not a tensor");
  auto batched = [&](size_t i) {
    return i < ins.size() && in_state[i] == State::kBatched && Rank(ins[i]) >= 1 &&
           ins[i]->shape()[0] == n_;
  };
  // Inputs from `from` on are weights: constant, or sized in a shape slot.
  auto rest_const = [&](size_t from) {
    for (size_t i = from; i < ins.size(); ++i)
      if (in_state[i] == State::kBatched ||
          (in_state[i] == State::kSized && !(e.shape_slots >> i & 1)))
        return false;
    return true;
  };
  std::vector<int64_t> ints;  // an attribute's or input's integers
  *out = State::kBatched;
  const int64_t r0 = ins.empty() || ins[0] == nullptr ? 0 : Rank(ins[0]);
  bool ok = false;
  switch (e.rule) {
    case Rule::kElementwise: {
      int64_t r = 0;
      for (const OnnxValue* v : ins)
        if (v != nullptr) r = std::max(r, Rank(v));
      ok = true;
      for (size_t i = 0; i < ins.size() && ok; ++i) {
        if (node.input(i).empty()) continue;
        const Shape s = ins[i]->shape();
        if (in_state[i] == State::kBatched) ok = Rank(ins[i]) == r && s[0] == n_;
        else if (in_state[i] == State::kSized) ok = false;
        else ok = Rank(ins[i]) < r || s[0] == 1;  // broadcast over the batch
      }
      break;
    }
    case Rule::kPerImage:
      ok = batched(0) && rest_const(1);
      if (node.op_type() == "BatchNormalization") {
        const onnx::AttributeProto* tm = FindAttr(node, "training_mode");
        ok &= (tm == nullptr || tm->i() == 0) &&
              (node.output_size() == 1 ||
               std::all_of(node.output().begin() + 1, node.output().end(),
                           [](const std::string& o) { return o.empty(); }));
      }
      // MaxPool's indices count the images before it.
      if (node.op_type() == "MaxPool") ok &= node.output_size() < 2 || node.output(1).empty();
      break;
    case Rule::kReshape:
      ok = batched(0) && rest_const(1);
      if (node.op_type() == "Expand") ok &= !outs.empty() && outs[0] && Rank(outs[0]) == r0;
      break;
    case Rule::kTranspose: {
      const Known perm = IntsOf(node, ins, "perm", kNoSlot, &ints);
      ok = batched(0) && ((perm == Known::kYes && !ints.empty() && ints[0] == 0) || r0 == 1);
      break;
    }
    case Rule::kAxis: {
      const onnx::AttributeProto* a = FindAttr(node, "axis");
      if (a == nullptr && e.default_axis == kNoDefault) break;
      ok = Norm(a != nullptr ? a->i() : e.default_axis, r0) > 0 &&
           (e.all_data_batched || (batched(0) && rest_const(1)));
      for (size_t i = 0; i < ins.size() && ok && e.all_data_batched; ++i) ok = batched(i);
      break;
    }
    case Rule::kReduce: {
      const Known axes = IntsOf(node, ins, "axes", 1, &ints);
      const onnx::AttributeProto* noop = FindAttr(node, "noop_with_empty_axes");
      const bool identity = noop != nullptr && noop->i() != 0;
      // No axes: every axis (0 too), or none with noop_with_empty_axes.
      ok = batched(0) && rest_const(1) &&
           (axes == Known::kAbsent || (axes == Known::kYes && ints.empty())
                ? identity
                : axes == Known::kYes && !HasZeroAxis(ints, r0));
      break;
    }
    case Rule::kSlice: {
      // Without axes the starts name axes 0, 1, ...: refused.
      ok = batched(0) && rest_const(1) && IntsOf(node, ins, "axes", 3, &ints) == Known::kYes &&
           !HasZeroAxis(ints, r0);
      break;
    }
    case Rule::kPad: {
      std::vector<int64_t> pads;
      ok = batched(0) && rest_const(1) && IntsOf(node, ins, "pads", 1, &pads) == Known::kYes;
      const Known axes = IntsOf(node, ins, "axes", 3, &ints);
      if (axes == Known::kYes) ok &= !HasZeroAxis(ints, r0);  // pads name these axes
      else if (axes == Known::kUnknown) ok = false;
      else ok &= static_cast<int64_t>(pads.size()) == 2 * r0 && pads[0] == 0 && pads[r0] == 0;
      break;
    }
    case Rule::kMatMul: {
      if (ins.size() != 2 || !batched(0) || r0 < 2) break;
      const int64_t r1 = Rank(ins[1]);
      if (in_state[1] == State::kBatched) ok = r1 == r0 && r0 >= 3 && batched(1);
      // A weight matrix, or stacked weights that broadcast over axis 0.
      else if (in_state[1] == State::kConst)
        ok = r1 <= 2 || r1 < r0 || (r1 == r0 && ins[1]->shape()[0] == 1);
      break;
    }
    case Rule::kGemm: {
      const onnx::AttributeProto* ta = FindAttr(node, "transA");
      ok = batched(0) && (ta == nullptr || ta->i() == 0) && rest_const(1) &&
           in_state[1] == State::kConst &&
           (ins.size() < 3 || node.input(2).empty() ||
            (in_state[2] == State::kConst && (Rank(ins[2]) < 2 || ins[2]->shape()[0] == 1)));
      break;
    }
    case Rule::kGather: {
      const onnx::AttributeProto* a = FindAttr(node, "axis");
      const int64_t axis = a != nullptr ? a->i() : 0;
      if (ins.size() != 2) break;
      if (in_state[0] == State::kBatched)  // rows of each image
        ok = batched(0) && Norm(axis, r0) > 0 && in_state[1] == State::kConst;
      else if (in_state[0] == State::kConst)  // an embedding table, batched ids
        ok = batched(1) && Norm(axis, r0) == 0;
      break;
    }
    case Rule::kShape:
      *out = State::kSized;
      return absl::OkStatus();
  }
  if (!ok) return absl::FailedPreconditionError("not per image here");
  for (const OnnxValue* v : outs)
    if (v != nullptr && (!v->is_tensor() || Rank(v) < 1 || v->shape()[0] != n_))
      return absl::FailedPreconditionError("an output whose axis 0 is not the batch");
  return absl::OkStatus();
}

absl::Status BatchTracker::Separable(const std::vector<std::string>& outputs) const {
  if (!failure_.ok()) return failure_;
  for (const std::string& o : outputs)
    if (Of(o) != State::kBatched)
      return absl::FailedPreconditionError(
          absl::StrCat("graph output '", o, "' is not computed per image"));
  return absl::OkStatus();
}

// Shape arithmetic, element by element: which elements of a small vector
// depend on the batch size.
std::optional<std::vector<bool>> BatchTracker::Dependence(const onnx::NodeProto& node,
                                                          const std::vector<const OnnxValue*>& ins,
                                                          const OnnxValue* out) const {
  constexpr int64_t kMaxElements = 64;
  if (out == nullptr || !out->is_tensor() || out->shape().size() > 1) return std::nullopt;
  const int64_t len = Prod(out->shape());
  if (len > kMaxElements) return std::nullopt;
  // Input i's dependence: none for a constant, its mask for a sized value.
  auto mask = [&](size_t i) -> std::optional<std::vector<bool>> {
    if (i >= ins.size() || ins[i] == nullptr || !ins[i]->is_tensor() ||
        ins[i]->shape().size() > 1 || Prod(ins[i]->shape()) > kMaxElements)
      return std::nullopt;
    const State st = Of(node.input(static_cast<int>(i)));
    if (st == State::kConst) return std::vector<bool>(Prod(ins[i]->shape()), false);
    auto it = dependence_.find(node.input(static_cast<int>(i)));
    if (st == State::kSized && it != dependence_.end()) return it->second;
    return std::nullopt;
  };
  const std::string& op = node.op_type();
  if (op == "Shape" || op == "Size") {
    if (op == "Size") return std::vector<bool>{true};
    const int64_t r = Rank(ins[0]);
    const onnx::AttributeProto* a = FindAttr(node, "start");
    int64_t start = a != nullptr ? a->i() : 0;
    start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
    std::vector<bool> dep(len, false);
    if (start == 0 && len > 0) dep[0] = true;  // axis 0 of a batched input
    return dep;
  }
  static const std::set<std::string> kSame = {"Cast", "Identity", "Neg", "Abs", "Floor", "Ceil",
                                              "Squeeze", "Unsqueeze", "Reshape", "Flatten"};
  static const std::set<std::string> kLanes = {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min",
                                               "Equal", "Less", "Greater", "LessOrEqual",
                                               "GreaterOrEqual", "And", "Or", "Where", "Pow"};
  if (kSame.count(op)) {
    std::optional<std::vector<bool>> m = mask(0);
    if (m && static_cast<int64_t>(m->size()) == len) return m;
    return std::nullopt;
  }
  if (kLanes.count(op)) {  // element j from element j of each input (or its scalar)
    std::vector<bool> dep(len, false);
    for (size_t i = 0; i < ins.size(); ++i) {
      std::optional<std::vector<bool>> m = mask(i);
      if (!m || (m->size() != 1 && static_cast<int64_t>(m->size()) != len)) return std::nullopt;
      for (int64_t j = 0; j < len; ++j) dep[j] = dep[j] || (*m)[m->size() == 1 ? 0 : j];
    }
    return dep;
  }
  if (op == "Concat") {
    std::vector<bool> dep;
    for (size_t i = 0; i < ins.size(); ++i) {
      std::optional<std::vector<bool>> m = mask(i);
      if (!m) return std::nullopt;
      dep.insert(dep.end(), m->begin(), m->end());
    }
    if (static_cast<int64_t>(dep.size()) != len) return std::nullopt;
    return dep;
  }
  if (op == "Slice" && ins.size() >= 3) {  // a vector's range (opset 10+: bounds as inputs)
    std::optional<std::vector<bool>> m = mask(0);
    std::vector<int64_t> b[4];  // starts, ends, axes, steps
    for (size_t i = 1; i < ins.size(); ++i) {
      if (node.input(static_cast<int>(i)).empty()) continue;
      if (Of(node.input(static_cast<int>(i))) != State::kConst || !ins[i]->host)
        return std::nullopt;
      b[i - 1] = ins[i]->host->Int64s();
    }
    if (!m || b[0].size() != 1 || b[1].size() != 1 || (!b[2].empty() && Norm(b[2][0], 1) != 0))
      return std::nullopt;
    const int64_t n = static_cast<int64_t>(m->size()), step = b[3].empty() ? 1 : b[3][0];
    if (step == 0) return std::nullopt;
    auto bound = [&](int64_t v, int64_t lo, int64_t hi) {
      return std::clamp<int64_t>(v < 0 ? v + n : v, lo, hi);
    };
    const int64_t start = step > 0 ? bound(b[0][0], 0, n) : bound(b[0][0], -1, n - 1);
    const int64_t end = step > 0 ? bound(b[1][0], 0, n) : bound(b[1][0], -1, n - 1);
    std::vector<bool> dep;
    for (int64_t j = start; step > 0 ? j < end : j > end; j += step) dep.push_back((*m)[j]);
    if (static_cast<int64_t>(dep.size()) != len) return std::nullopt;
    return dep;
  }
  if (op == "Gather" && ins.size() == 2) {  // a vector's elements by constant indices
    std::optional<std::vector<bool>> m = mask(0);
    if (!m || Of(node.input(1)) != State::kConst || !ins[1]->host) return std::nullopt;
    const std::vector<int64_t> idx = ins[1]->host->Int64s();
    if (static_cast<int64_t>(idx.size()) != len) return std::nullopt;
    std::vector<bool> dep;
    for (int64_t j : idx) {
      const int64_t k = Norm(j, static_cast<int64_t>(m->size()));
      if (k < 0) return std::nullopt;
      dep.push_back((*m)[k]);
    }
    return dep;
  }
  return std::nullopt;
}

double BatchTracker::LargestIntermediate(const std::vector<std::string>& outputs) const {
  double most = 0;
  for (const auto& [name, bytes] : image_bytes_)
    if (std::find(outputs.begin(), outputs.end(), name) == outputs.end())
      most = std::max(most, bytes);
  return most;
}

double BatchTracker::IntermediatesOver(double limit,
                                       const std::vector<std::string>& outputs) const {
  double sum = 0;
  for (const auto& [name, bytes] : image_bytes_)
    if (bytes * static_cast<double>(n_) > limit &&
        std::find(outputs.begin(), outputs.end(), name) == outputs.end())
      sum += bytes;
  return sum;
}

double BatchTracker::WeightBytes() const {
  double sum = 0;
  for (const auto& [name, bytes] : weight_bytes_) sum += bytes;
  return sum;
}

absl::Status BatchTracker::SameImages(const BatchTracker& other) const {
  if (state_ != other.state_)
    return absl::FailedPreconditionError("the values' batch states differ with the batch size");
  for (const auto& [name, shape] : image_shape_) {
    auto it = other.image_shape_.find(name);
    if (it == other.image_shape_.end() || it->second != shape)
      return absl::FailedPreconditionError(
          absl::StrCat("the shape of an image of '", name, "' changes with the batch size"));
  }
  return absl::OkStatus();
}

}  // namespace kiln
