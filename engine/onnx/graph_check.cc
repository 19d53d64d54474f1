#include "engine/onnx/graph_check.h"

#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {
namespace {

using Nodes = google::protobuf::RepeatedPtrField<onnx::NodeProto>;
using Functions = std::map<std::string, const onnx::FunctionProto*>;

bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

absl::Status Prefix(const std::string& where, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
}

// The names visible at a point of a graph: its own so far, then those of the
// enclosing graphs (defined before the node that holds the subgraph).
struct Names {
  const Names* parent = nullptr;
  std::unordered_set<std::string> local;
  bool Has(const std::string& n) const {
    for (const Names* p = this; p != nullptr; p = p->parent)
      if (p->local.count(n)) return true;
    return false;
  }
};

// A type kiln can take as a graph input: a tensor (possibly inside
// sequences / optionals) of a supported element type.
absl::Status CheckInputType(const onnx::TypeProto& t, const std::string& what) {
  if (t.has_optional_type()) return CheckInputType(t.optional_type().elem_type(), what);
  if (t.has_sequence_type()) return CheckInputType(t.sequence_type().elem_type(), what);
  if (t.has_tensor_type()) {
    int elem = t.tensor_type().elem_type();
    if (!DTypeFromOnnx(elem))
      return absl::UnimplementedError(absl::StrCat(what, " has element type ", OnnxTypeName(elem),
                                                   ", which kiln does not support"));
    return absl::OkStatus();
  }
  if (t.value_case() == onnx::TypeProto::VALUE_NOT_SET)
    return absl::InvalidArgumentError(absl::StrCat(what, " has no type"));
  return absl::UnimplementedError(absl::StrCat(what, " is not a tensor, sequence or optional"));
}

class Checker {
 public:
  Checker(const Functions& functions, const OpRegistry& registry)
      : functions_(functions), registry_(registry) {}

  absl::Status CheckGraph(const onnx::GraphProto& g, const Names* outer, const OpsetMap& opsets,
                          int depth, bool top) {
    if (depth > kMaxGraphDepth)
      return absl::InvalidArgumentError(
          absl::StrCat("subgraphs nest too deeply (more than ", kMaxGraphDepth, " levels)"));
    Names names;
    names.parent = outer;
    for (const onnx::TensorProto& t : g.initializer()) names.local.insert(t.name());
    for (const onnx::SparseTensorProto& t : g.sparse_initializer())
      names.local.insert(t.values().name());
    if (top) {
      for (const onnx::ValueInfoProto& in : g.input()) {
        if (names.local.count(in.name())) continue;  // an initializer (IR < 4 style)
        std::string what = absl::StrCat("graph input '", in.name(), "'");
        if (!in.has_type()) return absl::InvalidArgumentError(what + " has no type");
        RETURN_IF_ERROR(CheckInputType(in.type(), what));
      }
      for (const onnx::ValueInfoProto& out : g.output()) {
        const onnx::TypeProto& t = out.type();
        if (t.has_tensor_type() && t.tensor_type().elem_type() != onnx::TensorProto::UNDEFINED &&
            !DTypeFromOnnx(t.tensor_type().elem_type()))
          return absl::UnimplementedError(absl::StrCat(
              "graph output '", out.name(), "' has element type ",
              OnnxTypeName(t.tensor_type().elem_type()), ", which kiln does not support"));
      }
    }
    for (const onnx::ValueInfoProto& in : g.input()) names.local.insert(in.name());
    RETURN_IF_ERROR(CheckNodes(g.node(), &names, opsets, depth));
    for (const onnx::ValueInfoProto& out : g.output())
      if (!names.Has(out.name()))
        return absl::InvalidArgumentError(
            top ? absl::StrCat("graph output '", out.name(), "' is never produced")
                : absl::StrCat("subgraph '", g.name(), "': output '", out.name(),
                               "' is never produced"));
    return absl::OkStatus();
  }

 private:
  absl::Status CheckNodes(const Nodes& nodes, Names* names, const OpsetMap& opsets, int depth) {
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < nodes.size(); ++i)
      for (const std::string& out : nodes[i].output()) {
        if (out.empty()) continue;
        auto [it, fresh] = producer.emplace(out, i);
        if (!fresh)
          return absl::InvalidArgumentError(
              absl::StrCat(NodeLabel(nodes[i]), ": value '", out, "' is produced more than once (",
                           NodeLabel(nodes[it->second]), " produces it too)"));
        if (names->local.count(out))
          return absl::InvalidArgumentError(
              absl::StrCat(NodeLabel(nodes[i]), ": value '", out,
                           "' is produced more than once (it is also a graph input or "
                           "initializer)"));
      }
    for (int i = 0; i < nodes.size(); ++i) {
      const onnx::NodeProto& node = nodes[i];
      const std::string label = NodeLabel(node);
      RETURN_IF_ERROR(Prefix(label, CheckOp(node, opsets, depth)));
      for (const std::string& in : node.input()) {
        if (in.empty() || names->Has(in)) continue;
        auto p = producer.find(in);
        if (p == producer.end())
          return absl::InvalidArgumentError(absl::StrCat(
              label, ": input '", in,
              "' is not defined (not a graph input, an initializer or an earlier node's output)"));
        std::vector<int> cycle = Cycle(nodes, producer, i, p->second);
        if (!cycle.empty()) {
          std::vector<std::string> labels;
          for (int k : cycle) labels.push_back(NodeLabel(nodes[k]));
          return absl::InvalidArgumentError(
              absl::StrCat("the graph has a cycle: ", absl::StrJoin(labels, " -> ")));
        }
        return absl::InvalidArgumentError(
            absl::StrCat(label, ": reads '", in, "' before ", NodeLabel(nodes[p->second]),
                         " produces it (nodes must be in topological order)"));
      }
      for (const onnx::AttributeProto& a : node.attribute()) {
        std::string where = absl::StrCat(label, ": attribute '", a.name(), "'");
        if (a.has_g()) RETURN_IF_ERROR(Prefix(where, CheckGraph(a.g(), names, opsets, depth + 1, false)));
        for (const onnx::GraphProto& g : a.graphs())
          RETURN_IF_ERROR(Prefix(where, CheckGraph(g, names, opsets, depth + 1, false)));
      }
      for (const std::string& out : node.output())
        if (!out.empty()) names->local.insert(out);
    }
    return absl::OkStatus();
  }

  // Node `reader` reads a value of node `writer` (writer >= reader). The
  // cycle reader -> ... -> writer -> reader when `writer` depends on
  // `reader`'s outputs (through values of these nodes); empty otherwise.
  static std::vector<int> Cycle(const Nodes& nodes,
                                const std::unordered_map<std::string, int>& producer, int reader,
                                int writer) {
    if (writer == reader) return {reader, reader};
    // Walk back from `writer` over the producers of its inputs.
    std::unordered_map<int, int> next;  // node -> the node it feeds on the path
    std::vector<int> todo = {writer};
    next[writer] = -1;
    while (!todo.empty()) {
      int n = todo.back();
      todo.pop_back();
      for (const std::string& in : nodes[n].input()) {
        auto p = producer.find(in);
        if (p == producer.end() || next.count(p->second)) continue;
        next[p->second] = n;
        if (p->second == reader) {
          std::vector<int> path = {reader};
          for (int k = n; k != -1; k = next[k]) path.push_back(k);
          path.push_back(reader);
          return path;
        }
        todo.push_back(p->second);
      }
    }
    return {};
  }

  absl::Status CheckOp(const onnx::NodeProto& node, const OpsetMap& opsets, int depth) {
    const bool default_domain = IsDefaultDomain(node.domain());
    if (default_domain && registry_.Find(node.op_type()) != nullptr) {
      if (!opsets.count(""))
        return absl::InvalidArgumentError("the model imports no opset for domain ''");
      return absl::OkStatus();
    }
    std::string key = absl::StrCat(node.domain(), ":", node.op_type());
    auto fn = functions_.find(key);
    if (fn != functions_.end()) return CheckFunction(key, *fn->second, opsets, depth + 1);
    if (!default_domain)
      return absl::UnimplementedError(
          absl::StrCat("operators of domain '", node.domain(), "' are not supported"));
    return absl::UnimplementedError("unsupported operator");
  }

  absl::Status CheckFunction(const std::string& key, const onnx::FunctionProto& f,
                             const OpsetMap& outer_opsets, int depth) {
    if (active_.count(key))
      return absl::InvalidArgumentError(absl::StrCat("function '", key, "' calls itself"));
    if (done_.count(key)) return absl::OkStatus();
    if (depth > kMaxGraphDepth)
      return absl::InvalidArgumentError(
          absl::StrCat("functions nest too deeply (more than ", kMaxGraphDepth, " levels)"));
    active_.insert(key);
    OpsetMap opsets = outer_opsets;
    for (const onnx::OperatorSetIdProto& o : f.opset_import())
      opsets[IsDefaultDomain(o.domain()) ? "" : o.domain()] = o.version();
    Names names;  // functions see only their inputs
    for (const std::string& in : f.input()) names.local.insert(in);
    std::string where = absl::StrCat("function '", key, "'");
    RETURN_IF_ERROR(Prefix(where, CheckNodes(f.node(), &names, opsets, depth)));
    for (const std::string& out : f.output())
      if (!names.Has(out))
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": output '", out, "' is never produced"));
    active_.erase(key);
    done_.insert(key);
    return absl::OkStatus();
  }

  const Functions& functions_;
  const OpRegistry& registry_;
  std::set<std::string> active_, done_;
};

}  // namespace

absl::Status CheckModelGraph(const onnx::ModelProto& model, const OpsetMap& opsets,
                             const Functions& functions, const OpRegistry& registry) {
  Checker c(functions, registry);
  return c.CheckGraph(model.graph(), nullptr, opsets, 0, true);
}

}  // namespace kiln
