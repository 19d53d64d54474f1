// GraphBuilder: turns ONNX nodes into lazy Tensor ops, one node at a time.
//
// Values live in Scopes (name -> OnnxValue); a subgraph (If / Loop / Scan
// body) runs in a child scope that sees its parent's values. Each node is
// dispatched on its op type and its domain's opset version through the
// OpRegistry; nodes whose inputs are all small host values are constant-
// folded on the host. Every error names the node and its op type:
//   node 'conv1' (Conv): ...
// Not thread-safe: one builder per graph build.
#ifndef KILN_ENGINE_ONNX_GRAPH_BUILDER_H_
#define KILN_ENGINE_ONNX_GRAPH_BUILDER_H_

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/onnx/op_context.h"
#include "engine/onnx/op_registry.h"

namespace onnx {
class FunctionProto;
class GraphProto;
}  // namespace onnx

namespace kiln {

// Opset version per domain ("" is ai.onnx).
using OpsetMap = std::map<std::string, int64_t>;

// Largest host value (in elements) kept next to an uploaded constant, and
// the largest input / output of a constant-folded node.
inline constexpr int64_t kHostKeepLimit = 4096;
// Most node runs one graph build may take (Loop / Scan bodies and function
// calls count each time they run): a bound on unrolling.
inline constexpr int64_t kMaxNodeRuns = 1000000;

// Index of the last node of a graph that reads each name (its inputs, and
// the names its subgraphs read); graph outputs are read "after the end".
using LastUses = std::unordered_map<std::string, int>;
LastUses ComputeLastUses(const onnx::GraphProto& graph);
// The nodes of a graph that read each name as an input (not through their
// subgraphs); a graph output, read outside, has a null reader.
using Readers = std::unordered_map<std::string, std::vector<const onnx::NodeProto*>>;
Readers ComputeReaders(const onnx::GraphProto& graph);

class Scope {
 public:
  explicit Scope(const Scope* parent = nullptr) : parent_(parent) {}
  // The value named `name` here or in an enclosing scope; null if unknown.
  const OnnxValue* Find(const std::string& name) const;
  bool HasLocal(const std::string& name) const { return values_.count(name) > 0; }
  void Set(const std::string& name, OnnxValue v) { values_[name] = std::move(v); }
  const Scope* parent() const { return parent_; }

  // Liveness, when known: the graph's last uses and the index of the node
  // being built. Without it every value counts as live.
  void SetLastUses(LastUses last_uses) { last_uses_ = std::move(last_uses); }
  // The readers of this scope's names, when known (ComputeReaders): a name
  // read by a subgraph, or a scope without them, gives null.
  void SetReaders(Readers readers) { readers_ = std::move(readers); }
  const std::vector<const onnx::NodeProto*>* ReadersOf(const std::string& name) const {
    if (!readers_) return nullptr;
    auto it = readers_->find(name);
    return it == readers_->end() ? nullptr : &it->second;
  }
  void set_now(int node_index) { now_ = node_index; }
  // Calls fn(value) for each local tensor value a node at or after the
  // current one still reads.
  template <typename Fn>
  void ForEachLiveTensor(Fn fn) const {
    for (const auto& [name, v] : values_) {
      if (!v.is_tensor() || !v.tensor) continue;
      if (last_uses_) {
        auto it = last_uses_->find(name);
        if (it == last_uses_->end() || it->second < now_) continue;
      }
      fn(*v.tensor);
    }
  }

 private:
  const Scope* parent_;
  std::unordered_map<std::string, OnnxValue> values_;
  std::optional<LastUses> last_uses_;
  std::optional<Readers> readers_;
  int now_ = 0;
};

class DerivedWeights;

class GraphBuilder {
 public:
  struct Options {
    Engine* engine = nullptr;
    std::string device = "CPU";
    OpsetMap opsets;
    // Model-local functions by "domain:name".
    std::map<std::string, const onnx::FunctionProto*> functions;
    const OpRegistry* registry = nullptr;  // null: StandardOps()
    // The model's cache of weights derived from its constants (derived_weights.h);
    // null: none are derived.
    DerivedWeights* derived = nullptr;
  };
  explicit GraphBuilder(Options options);
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  Engine* engine() const { return options_.engine; }
  const std::string& device() const { return options_.device; }
  DerivedWeights* derived() const { return options_.derived; }
  // The imported version of `domain` ("" / "ai.onnx" alike); -1 when absent.
  int64_t Opset(const std::string& domain) const;

  absl::Status RunNode(const onnx::NodeProto& node, Scope* scope);
  // Runs a subgraph with its inputs bound to `inputs`, in a child scope of
  // `outer`; returns its outputs in order.
  absl::StatusOr<std::vector<OnnxValue>> RunSubgraph(const onnx::GraphProto& graph,
                                                     const std::vector<OnnxValue>& inputs,
                                                     const Scope* outer);
  // The scope of the node being built (for control-flow handlers).
  const Scope* current_scope() const { return current_; }

  // Reads `t` on the host. First it realizes, in one schedule with `t`, the
  // live values of the enclosing scopes that share a reduction (a
  // convolution, a matmul, a pooling, a gather, ...) with `t`: the lazy graph
  // does not remember what a schedule computed, so without this every host
  // read (a NonZero or a TopK per class of a detector) would compute the
  // shared backbone again, and so would the nodes after it.
  absl::StatusOr<HostTensor> ReadOnHost(Tensor t);

 private:
  absl::Status Dispatch(const onnx::NodeProto& node, Scope* scope);
  absl::Status RunFunction(const onnx::NodeProto& node, const onnx::FunctionProto& f,
                           Scope* scope);

  Options options_;
  const Scope* current_ = nullptr;
  int depth_ = 0;
  int64_t runs_ = 0;
  int64_t* total_runs_ = &runs_;  // shared with the builders of function calls
};

// "node 'name' (OpType)" (the first output names unnamed nodes).
std::string NodeLabel(const onnx::NodeProto& node);

// A constant as a value: uploaded to `device`, plus a host copy when it has
// at most kHostKeepLimit elements.
OnnxValue ConstantValue(HostTensor h, Engine* e, const std::string& device);
// The same from stored bytes (Prod(shape) elements of dtype), without a host
// copy when the constant is too large to keep one.
OnnxValue ConstantValue(DType dtype, Shape shape, absl::string_view bytes, Engine* e,
                        const std::string& device);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_GRAPH_BUILDER_H_
