#include "engine/onnx/graph_builder.h"

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/onnx/channel_blocks.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {
namespace {

constexpr int kMaxDepth = 64;  // nested subgraphs / function calls

bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Attributes that do not change an inference result.
bool IgnorableAttribute(const std::string& op, const std::string& attr) {
  if (attr == "consumed_inputs") return true;  // opset < 6 in-place hint
  if (op == "Dropout" && attr == "seed") return true;
  // Saturation only matters for float8 targets, which kiln does not have.
  if ((op == "Cast" || op == "CastLike" || op == "QuantizeLinear") && attr == "saturate") return true;
  return false;
}

absl::Status Prefix(const std::string& label, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(label, ": ", s.message()));
}

// Calls fn(name) for every name the nodes of `graph` (and their subgraphs,
// recursively) read.
template <typename Fn>
void ForEachReadName(const onnx::GraphProto& graph, Fn& fn) {
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& name : node.input())
      if (!name.empty()) fn(name);
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) ForEachReadName(a.g(), fn);
      for (const onnx::GraphProto& g : a.graphs()) ForEachReadName(g, fn);
    }
  }
}

// True for the nodes of a lazy graph that cost real work to recompute.
bool IsHeavy(const UOp* u) {
  return u->op() == Op::kReduceAxis || u->op() == Op::kContiguous || u->op() == Op::kGather ||
         u->op() == Op::kCopy;
}

}  // namespace

LastUses ComputeLastUses(const onnx::GraphProto& graph) {
  LastUses last;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    auto use = [&](const std::string& name) { last[name] = i; };
    for (const std::string& name : node.input())
      if (!name.empty()) use(name);
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) ForEachReadName(a.g(), use);
      for (const onnx::GraphProto& g : a.graphs()) ForEachReadName(g, use);
    }
  }
  for (const onnx::ValueInfoProto& o : graph.output()) last[o.name()] = graph.node_size();
  return last;
}

Readers ComputeReaders(const onnx::GraphProto& graph) {
  Readers readers;
  std::unordered_set<std::string> in_subgraphs;
  auto mark = [&](const std::string& name) { in_subgraphs.insert(name); };
  for (const onnx::NodeProto& node : graph.node()) {
    for (const std::string& name : node.input())
      if (!name.empty()) readers[name].push_back(&node);
    for (const onnx::AttributeProto& a : node.attribute()) {
      if (a.has_g()) ForEachReadName(a.g(), mark);
      for (const onnx::GraphProto& g : a.graphs()) ForEachReadName(g, mark);
    }
  }
  for (const onnx::ValueInfoProto& o : graph.output()) readers[o.name()].push_back(nullptr);
  for (const std::string& name : in_subgraphs) readers.erase(name);  // readers unknown
  return readers;
}

const OnnxValue* Scope::Find(const std::string& name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_) {
    auto it = s->values_.find(name);
    if (it != s->values_.end()) return &it->second;
  }
  return nullptr;
}

std::string NodeLabel(const onnx::NodeProto& node) {
  std::string name = node.name();
  if (name.empty() && node.output_size() > 0) name = node.output(0);
  return absl::StrCat("node '", name, "' (", node.op_type(), ")");
}

OnnxValue ConstantValue(HostTensor h, Engine* e, const std::string& device) {
  Tensor t = h.ToTensor(e, device);
  OnnxValue v = OnnxValue::FromTensor(t);
  if (h.numel() <= kHostKeepLimit) v.host = std::make_shared<const HostTensor>(std::move(h));
  return v;
}

OnnxValue ConstantValue(DType dtype, Shape shape, absl::string_view bytes, Engine* e,
                        const std::string& device) {
  if (Prod(shape) <= kHostKeepLimit)
    return ConstantValue(HostTensor::FromBytes(dtype, std::move(shape), bytes.data()), e, device);
  return OnnxValue::FromTensor(Tensor::FromData(e, bytes.data(), bytes.size(), shape, dtype, device));
}

GraphBuilder::GraphBuilder(Options options) : options_(std::move(options)) {
  if (options_.registry == nullptr) options_.registry = &StandardOps();
}

int64_t GraphBuilder::Opset(const std::string& domain) const {
  auto it = options_.opsets.find(IsDefaultDomain(domain) ? "" : domain);
  return it == options_.opsets.end() ? -1 : it->second;
}

absl::Status GraphBuilder::RunNode(const onnx::NodeProto& node, Scope* scope) {
  if (depth_ > kMaxDepth)
    return absl::InvalidArgumentError(absl::StrCat(NodeLabel(node), ": subgraphs nest too deeply"));
  if (++*total_runs_ > kMaxNodeRuns)
    return absl::ResourceExhaustedError(absl::StrCat(
        NodeLabel(node), ": the graph unrolls to too many nodes (more than ", kMaxNodeRuns,
        " node runs: loops, scans or function calls run too long)"));
  const Scope* saved = current_;
  current_ = scope;
  ++depth_;
  absl::Status s = Dispatch(node, scope);
  --depth_;
  current_ = saved;
  return s;
}

absl::Status GraphBuilder::Dispatch(const onnx::NodeProto& node, Scope* scope) {
  const std::string label = NodeLabel(node);
  auto fn = options_.functions.find(absl::StrCat(node.domain(), ":", node.op_type()));
  const OpDef* def = nullptr;
  if (IsDefaultDomain(node.domain())) def = options_.registry->Find(node.op_type());
  if (def == nullptr) {
    if (fn != options_.functions.end()) return RunFunction(node, *fn->second, scope);
    if (!IsDefaultDomain(node.domain()))
      return absl::UnimplementedError(
          absl::StrCat(label, ": operators of domain '", node.domain(), "' are not supported"));
    return absl::UnimplementedError(absl::StrCat(label, ": unsupported operator"));
  }
  int64_t opset = Opset(node.domain());
  if (opset < 0)
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": the model imports no opset for domain '", node.domain(), "'"));

  std::vector<const OnnxValue*> inputs;
  bool all_host = true;
  for (const std::string& name : node.input()) {
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    const OnnxValue* v = scope->Find(name);
    if (v == nullptr)
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": input '", name,
          "' is not defined (not a graph input, an initializer or an earlier node's output)"));
    inputs.push_back(v);
    if (v->kind != OnnxValue::Kind::kNone &&
        (!v->is_tensor() || !v->host || v->host->numel() > kHostKeepLimit))
      all_host = false;
  }
  // An elementwise op on a value kept in channel blocks runs on the blocks
  // (channel_blocks.h); its outputs are blocked values.
  std::vector<OnnxValue> in_blocks;
  int64_t channels = 0;
  const bool blocked = BlockedElementwise(node.op_type()) && !all_host &&
                       SubstituteChannelBlocks(node.op_type(), inputs, engine(), device(),
                                               &in_blocks, &inputs, &channels);
  OpContext ctx(node, static_cast<int>(opset), this, std::move(inputs));
  bool done = false;
  if (def->fold && all_host) {
    auto folded = def->fold(ctx);
    if (!folded.ok())
      return Prefix(label, ctx.attr_error().ok() ? folded.status() : ctx.attr_error());
    done = *folded;
  }
  if (!done) {
    absl::Status s = def->run(ctx);
    // A mistyped attribute is the root cause of whatever failed after it.
    if (!s.ok()) return Prefix(label, ctx.attr_error().ok() ? s : ctx.attr_error());
  }
  if (!ctx.attr_error().ok()) return Prefix(label, ctx.attr_error());
  // An attribute the handler never looked at would be silently ignored.
  for (const onnx::AttributeProto& a : node.attribute())
    if (!ctx.read_attrs().count(a.name()) && !IgnorableAttribute(node.op_type(), a.name()))
      return absl::UnimplementedError(
          absl::StrCat(label, ": attribute '", a.name(), "' is not supported"));
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    const OnnxValue& out = ctx.outputs()[i];
    if (out.kind == OnnxValue::Kind::kNone)
      return absl::UnimplementedError(
          absl::StrCat(label, ": output ", i, " ('", node.output(i), "') is not supported"));
    if (out.tensor && !out.tensor->ok()) return Prefix(label, out.tensor->status());
  }
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    OnnxValue& out = ctx.outputs()[i];
    if (blocked && out.tensor) out = BlockedValue(*out.tensor, channels);
    scope->Set(node.output(i), std::move(out));
  }
  return absl::OkStatus();
}

absl::StatusOr<HostTensor> GraphBuilder::ReadOnHost(Tensor t) {
  RETURN_IF_ERROR(t.status());
  std::unordered_set<const UOp*> heavy;
  for (const UOp* u : Toposort(t.uop()))
    if (IsHeavy(u)) heavy.insert(u);
  if (!heavy.empty()) {
    std::vector<Tensor> shared;
    std::unordered_set<const UOp*> seen{t.uop().get()};
    for (const Scope* s = current_; s != nullptr; s = s->parent()) {
      s->ForEachLiveTensor([&](const Tensor& v) {
        if (!v.ok() || !seen.insert(v.uop().get()).second) return;
        for (const UOp* u : Toposort(v.uop()))
          if (heavy.count(u)) {
            shared.push_back(v);  // shares its state with the scope's value
            return;
          }
      });
    }
    if (!shared.empty()) {
      std::vector<Tensor*> all{&t};
      for (Tensor& v : shared) all.push_back(&v);
      RETURN_IF_ERROR(Tensor::RealizeAll(all));
    }
  }
  return ReadBack(std::move(t));
}

absl::StatusOr<std::vector<OnnxValue>> GraphBuilder::RunSubgraph(
    const onnx::GraphProto& graph, const std::vector<OnnxValue>& inputs, const Scope* outer) {
  if (static_cast<int>(inputs.size()) != graph.input_size())
    return absl::InvalidArgumentError(absl::StrCat("subgraph '", graph.name(), "' takes ",
                                                   graph.input_size(), " inputs, got ",
                                                   inputs.size()));
  Scope scope(outer);
  for (const onnx::TensorProto& init : graph.initializer()) {
    ASSIGN_OR_RETURN(HostTensor h, HostTensorFromProto(init));
    OnnxValue v = ConstantValue(std::move(h), engine(), device());
    if (v.tensor && !v.tensor->ok()) return v.tensor->status();
    scope.Set(init.name(), std::move(v));
  }
  for (int i = 0; i < graph.input_size(); ++i) scope.Set(graph.input(i).name(), inputs[i]);
  scope.SetLastUses(ComputeLastUses(graph));
  for (int i = 0; i < graph.node_size(); ++i) {
    scope.set_now(i);
    RETURN_IF_ERROR(RunNode(graph.node(i), &scope));
  }
  std::vector<OnnxValue> outs;
  for (const onnx::ValueInfoProto& o : graph.output()) {
    const OnnxValue* v = scope.Find(o.name());
    if (v == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat("subgraph output '", o.name(), "' is never produced"));
    outs.push_back(*v);
  }
  return outs;
}

absl::Status GraphBuilder::RunFunction(const onnx::NodeProto& node, const onnx::FunctionProto& f,
                                       Scope* scope) {
  const std::string label = NodeLabel(node);
  if (node.input_size() > f.input_size() || node.output_size() > f.output_size())
    return absl::InvalidArgumentError(absl::StrCat(label, ": more inputs / outputs than function '",
                                                   f.name(), "' declares"));
  Options opts = options_;
  for (const onnx::OperatorSetIdProto& o : f.opset_import())
    opts.opsets[IsDefaultDomain(o.domain()) ? "" : o.domain()] = o.version();
  GraphBuilder inner(opts);
  inner.depth_ = depth_ + 1;
  inner.total_runs_ = total_runs_;
  Scope body;  // functions see only their inputs
  for (int i = 0; i < f.input_size(); ++i) {
    OnnxValue v;
    if (i < node.input_size() && !node.input(i).empty()) {
      const OnnxValue* src = scope->Find(node.input(i));
      if (src == nullptr)
        return absl::InvalidArgumentError(
            absl::StrCat(label, ": input '", node.input(i), "' is not defined"));
      v = *src;
    }
    body.Set(f.input(i), std::move(v));
  }
  for (const onnx::NodeProto& fnode : f.node()) {
    onnx::NodeProto n = fnode;
    n.clear_attribute();
    for (const onnx::AttributeProto& a : fnode.attribute()) {
      if (a.ref_attr_name().empty()) {
        *n.add_attribute() = a;
        continue;
      }
      for (const onnx::AttributeProto& actual : node.attribute()) {
        if (actual.name() != a.ref_attr_name()) continue;
        onnx::AttributeProto* copy = n.add_attribute();
        *copy = actual;
        copy->set_name(a.name());
      }
    }
    absl::Status s = inner.RunNode(n, &body);
    if (!s.ok()) return Prefix(label, s);
  }
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty()) continue;
    const OnnxValue* v = body.Find(f.output(i));
    if (v == nullptr)
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": function output '", f.output(i), "' is never produced"));
    scope->Set(node.output(i), *v);
  }
  return absl::OkStatus();
}

}  // namespace kiln
