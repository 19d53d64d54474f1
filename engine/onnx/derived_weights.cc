#include "engine/onnx/derived_weights.h"

#include <utility>

#include "engine/realize/engine.h"

namespace kiln {

bool DerivedWeights::IsConstant(const std::string& name, const OnnxValue* v) const {
  // The constants scope has no parent: Find looks only at its own entries.
  return v != nullptr && constants_ != nullptr && constants_->Find(name) == v && v->is_tensor();
}

absl::StatusOr<Tensor> DerivedWeights::Get(const std::string& key,
                                           const std::function<Tensor()>& make) {
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
