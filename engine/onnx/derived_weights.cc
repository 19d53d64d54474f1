#include "engine/onnx/derived_weights.h"

#include <utility>

#include "engine/realize/engine.h"

namespace kiln {

bool DerivedWeights::IsConstant(const std::string& name, const OnnxValue* v) const {
  // The constants scope has no parent: Find looks only at its own entries.
  if (v == nullptr || constants_ == nullptr || !v->is_tensor()) return false;
  if (constants_->Find(name) == v) return true;
  // An alias: `v` must carry the constant's own tensor (an Identity's
  // output is a copy of the constant's value under another name).
  const std::string of = Name(name);
  const OnnxValue* c = of == name ? nullptr : constants_->Find(of);
  return c != nullptr && c->tensor && v->tensor && c->tensor->uop() == v->tensor->uop();
}

void DerivedWeights::AddAlias(const std::string& name, const std::string& of, const OnnxValue* v) {
  if (name == of || !IsConstant(of, v)) return;
  const std::string root = Name(of);
  std::lock_guard<std::mutex> lock(mu_);
  aliases_[name] = root;
}

std::string DerivedWeights::Name(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = aliases_.find(name);
  return it == aliases_.end() ? name : it->second;
}

absl::StatusOr<Tensor> DerivedWeights::Get(const std::string& name, const std::string& layout,
                                           const std::function<Tensor()>& make) {
  const std::string key = Name(name) + layout;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  Tensor t;
  {
    CaptureScope unrecorded;  // innermost scope: a JIT capture around us sees none of it
    t = make();
    if (absl::Status s = t.Realize(); !s.ok()) return s;
  }
  cache_.emplace(key, t);
  return t;
}

size_t DerivedWeights::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

}  // namespace kiln
