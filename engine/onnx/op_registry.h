// The table of ONNX operators the importer implements.
//
// Each op has a device implementation (builds lazy Tensor ops) and may have
// a host implementation used for constant folding: when every input of a
// node is known on the host and small, the host version computes the
// outputs at graph-build time (shape arithmetic: Shape -> Gather -> Concat
// -> Reshape, ...). A host implementation returns false when it cannot
// handle the case (dtype, size), and the device version runs instead.
// The registry is immutable after construction; thread-safe to read.
#ifndef KILN_ENGINE_ONNX_OP_REGISTRY_H_
#define KILN_ENGINE_ONNX_OP_REGISTRY_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/onnx/op_context.h"

namespace kiln {

using OpFn = std::function<absl::Status(OpContext&)>;
using FoldFn = std::function<absl::StatusOr<bool>(OpContext&)>;

struct OpDef {
  OpFn run;
  FoldFn fold;  // may be empty
};

class OpRegistry {
 public:
  void Register(const std::string& op_type, OpFn run, FoldFn fold = nullptr);
  // Adds / replaces the host implementation of a registered op.
  void SetFold(const std::string& op_type, FoldFn fold);
  const OpDef* Find(const std::string& op_type) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, OpDef> ops_;
};

// All ai.onnx operators kiln implements (built once).
const OpRegistry& StandardOps();

// Registration functions, one per ops_*.cc file.
void RegisterElementwiseOps(OpRegistry* r);
void RegisterReduceOps(OpRegistry* r);
void RegisterShapeOps(OpRegistry* r);
void RegisterIndexOps(OpRegistry* r);
void RegisterNnOps(OpRegistry* r);
void RegisterNormOps(OpRegistry* r);
void RegisterMiscOps(OpRegistry* r);
void RegisterControlOps(OpRegistry* r);
void RegisterLossOps(OpRegistry* r);
void RegisterResizeOps(OpRegistry* r);
void RegisterQuantOps(OpRegistry* r);
void RegisterSignalOps(OpRegistry* r);
void RegisterRnnOps(OpRegistry* r);
void RegisterHostOps(OpRegistry* r);
void RegisterExtraOps(OpRegistry* r);
void RegisterRandomOps(OpRegistry* r);
void RegisterFoldOps(OpRegistry* r);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_OP_REGISTRY_H_
