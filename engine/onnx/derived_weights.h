// Weights derived once from a model's constants: the Winograd transform of a
// 3x3 convolution's weight (tensor_winograd.cc) is computed and realized the
// first time a graph build asks for it, outside any JIT capture (its kernels
// are not recorded, so replays never compute it again), and kept for every
// later build of any input shape.
//
// Only a value that is the model's own constant may be derived from: the
// caller passes the value its scope found for the name, and it must be the
// very entry of the model's constants (a subgraph's value of the same name,
// or a model input, is not), or the output of an Identity of one (exporters
// write a weight shared by several layers once and Identity nodes for the
// others: the BERT-style encoder's layers 1-3), which shares its derived
// tensors (Get resolves the alias).
//
// Thread safety: Get may be called from concurrent graph builds.
#ifndef KILN_ENGINE_ONNX_DERIVED_WEIGHTS_H_
#define KILN_ENGINE_ONNX_DERIVED_WEIGHTS_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "engine/onnx/graph_builder.h"

namespace kiln {

class DerivedWeights {
 public:
  explicit DerivedWeights(const Scope* constants) : constants_(constants) {}

  // True when `v` (what a scope found for `name`) is the model's constant,
  // or `name` an alias of one whose value `v` carries.
  bool IsConstant(const std::string& name, const OnnxValue* v) const;

  // Records `name` (an Identity node's output carrying `v`) as an alias of
  // the constant `of`, when IsConstant(of, v): Get under the alias is Get
  // under the constant's name.
  void AddAlias(const std::string& name, const std::string& of, const OnnxValue* v);

  // The tensor derived as `layout` (a key suffix naming the layout) from
  // the constant `name` (or the constant it is an alias of), or else
  // make(), realized now without being recorded by a JIT capture, and
  // cached. A failure is returned and not cached.
  absl::StatusOr<Tensor> Get(const std::string& name, const std::string& layout,
                             const std::function<Tensor()>& make);

  // How many tensors are cached.
  size_t size() const;

 private:
  // The constant `name` is an alias of, or `name`.
  std::string Name(const std::string& name) const;

  const Scope* constants_;
  mutable std::mutex mu_;
  std::map<std::string, Tensor> cache_;
  std::map<std::string, std::string> aliases_;  // alias -> the constant's name
};

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_DERIVED_WEIGHTS_H_
