// CheckModelGraph: validates a model's graphs at load, so that a model that
// could never run fails its load instead of its first inference.
//
// Checked, in the main graph, every subgraph (If / Loop / Scan bodies, at any
// depth) and every model-local function a node calls:
//   * each node's operator exists: an ai.onnx operator kiln implements (its
//     domain imported) or a model-local function; other domains are refused;
//   * each value a node reads is defined before it: a graph input, an
//     initializer, an earlier node's output, or (in a subgraph) a value of an
//     enclosing graph defined before the subgraph's node; a value produced
//     by a later node is reported as a cycle when there is one, else as an
//     ordering error (ONNX requires topological order);
//   * each value is produced once, every graph output is produced;
//   * main-graph inputs have a type, and tensor element types kiln supports
//     (UNDEFINED, STRING, complex are refused; also for outputs that declare
//     one);
//   * functions do not call themselves, and graphs / functions nest at most
//     kMaxGraphDepth deep.
// Errors name the place: node 'a' (Add): input 'x' is not defined ...
// Stateless; thread-safe.
#ifndef KILN_ENGINE_ONNX_GRAPH_CHECK_H_
#define KILN_ENGINE_ONNX_GRAPH_CHECK_H_

#include <map>
#include <string>

#include "absl/status/status.h"
#include "engine/onnx/graph_builder.h"
#include "engine/onnx/op_registry.h"

namespace onnx {
class FunctionProto;
class ModelProto;
}  // namespace onnx

namespace kiln {

inline constexpr int kMaxGraphDepth = 64;

absl::Status CheckModelGraph(const onnx::ModelProto& model, const OpsetMap& opsets,
                             const std::map<std::string, const onnx::FunctionProto*>& functions,
                             const OpRegistry& registry = StandardOps());

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_GRAPH_CHECK_H_
