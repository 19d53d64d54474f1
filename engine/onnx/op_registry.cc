#include "engine/onnx/op_registry.h"

namespace kiln {

void OpRegistry::Register(const std::string& op_type, OpFn run, FoldFn fold) {
  ops_[op_type] = OpDef{std::move(run), std::move(fold)};
}

void OpRegistry::SetFold(const std::string& op_type, FoldFn fold) {
  auto it = ops_.find(op_type);
  if (it != ops_.end()) it->second.fold = std::move(fold);
}

const OpDef* OpRegistry::Find(const std::string& op_type) const {
  auto it = ops_.find(op_type);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, def] : ops_) names.push_back(name);
  return names;
}

const OpRegistry& StandardOps() {
  static const OpRegistry* const registry = [] {
    auto* r = new OpRegistry();
    RegisterElementwiseOps(r);
    RegisterReduceOps(r);
    RegisterShapeOps(r);
    RegisterIndexOps(r);
    RegisterNnOps(r);
    RegisterNormOps(r);
    RegisterMiscOps(r);
    RegisterControlOps(r);
    RegisterLossOps(r);
    RegisterResizeOps(r);
    RegisterQuantOps(r);
    RegisterSignalOps(r);
    RegisterRnnOps(r);
    RegisterHostOps(r);
    RegisterExtraOps(r);
    RegisterRandomOps(r);
    RegisterFoldOps(r);  // last: attaches host versions to registered ops
    return r;
  }();
  return *registry;
}

}  // namespace kiln
