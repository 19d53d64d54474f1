#include "engine/onnx/batch_split.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"

namespace kiln {
namespace {

// "f32[8,3,224,224];i64[8,128]": what a choice is kept for.
std::string Signature(const std::vector<OnnxValue>& inputs) {
  std::string key;
  for (const OnnxValue& v : inputs) {
    if (!v.is_tensor()) {
      absl::StrAppend(&key, "?;");
      continue;
    }
    absl::StrAppend(&key, v.dtype().Name(), "[");
    for (int64_t d : v.shape()) absl::StrAppend(&key, d, ",");
    absl::StrAppend(&key, "];");
  }
  return key;
}

// What a choice is kept for: the signature and the groups of the policy
// it was made under (a kilnd instance on one thread and a caller on two
// choose differently).
std::string Key(const std::vector<OnnxValue>& inputs, const BatchSplitter::Policy& policy) {
  return absl::StrCat(Signature(inputs), "g", policy.groups);
}

}  // namespace

BatchSplitter::Policy BatchSplitter::PolicyFor(const Device& device) {
  if (!Env().batch_split) return {"KILN_BATCH_SPLIT=0"};
  if (device.renderer() != "c")
    return {absl::StrCat(device.name(), " is not the CPU device: slices are measured on CPUs only")};
  return {"", std::max(1, device.workers())};
}

int64_t SliceImages(int64_t n, double image_bytes) {
  if (n <= 1 || !(image_bytes > 0)) return n;
  const double fit = kSliceBytes / image_bytes;
  if (fit >= static_cast<double>(n)) return n;
  const int64_t want = std::max<int64_t>(1, static_cast<int64_t>(fit));
  // The fewest equal slices of at most `want` images; past kMaxSlices (each
  // slice is a graph to build), the most slices up to it.
  for (int64_t s = (n + want - 1) / want; s <= kMaxSlices; ++s)
    if (n % s == 0) return n / s;
  for (int64_t s = std::min(n, kMaxSlices); s >= 2; --s)
    if (n % s == 0) return n / s;
  return n;
}

int64_t BatchSplitter::BatchOf(const std::vector<OnnxValue>& inputs,
                               std::vector<bool>* batched) const {
  int64_t n = 0;
  batched->assign(inputs.size(), false);
  if (inputs.size() != dynamic_axis0_.size()) return 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const OnnxValue& v = inputs[i];
    if (!dynamic_axis0_[i] || !v.is_tensor() || !v.tensor || v.tensor->ndim() < 1) continue;
    const int64_t d = v.tensor->shape()[0];
    if (n != 0 && d != n) return 0;  // two batch sizes: not a batch
    n = d;
    (*batched)[i] = true;
  }
  return n > 1 ? n : 0;
}

void BatchSplitter::Remember(const std::string& key, Choice c) const {
  // Bounded: a client sending ever new shapes makes the choices for the
  // ones before be made again, not the map grow.
  if (choices_.size() >= kMaxChoices && !choices_.count(key)) choices_.erase(choices_.begin());
  choices_[key] = std::move(c);
}

std::optional<BatchSplitter::Choice> BatchSplitter::ChoiceFor(
    const std::vector<OnnxValue>& inputs) const {
  std::vector<bool> batched;
  const int64_t n = BatchOf(inputs, &batched);
  if (n == 0) return std::nullopt;
  Policy policy = policy_();
  if (!policy.off.empty()) return Choice{n, n, 0, std::move(policy.off)};
  absl::MutexLock lock(&mu_);
  auto it = choices_.find(Key(inputs, policy));
  if (it == choices_.end()) return std::nullopt;
  return it->second;
}

// The inputs of slice [start, start + size): batched ones cut along axis 0.
static std::vector<OnnxValue> SliceInputs(const std::vector<OnnxValue>& inputs,
                                          const std::vector<bool>& batched, int64_t start,
                                          int64_t size) {
  std::vector<OnnxValue> out = inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!batched[i]) continue;
    Pads bounds;
    for (int64_t d : inputs[i].tensor->shape()) bounds.push_back({0, d});
    bounds[0] = {start, start + size};
    out[i] = OnnxValue::FromTensor(inputs[i].tensor->Shrink(bounds));
  }
  return out;
}

absl::StatusOr<std::vector<OnnxValue>> BatchSplitter::Choose(
    const std::vector<OnnxValue>& inputs, const std::vector<bool>& batched, int64_t n,
    int64_t groups, const Build& build, Choice* choice, std::vector<OnnxValue>* first) const {
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (batched[i]) names.push_back(inputs_[i]);
  BatchTracker whole(n, names);
  ASSIGN_OR_RETURN(std::vector<OnnxValue> outs, build(inputs, &whole));
  choice->batch = choice->images = n;
  absl::Status s = whole.Separable(outputs_);
  if (!s.ok()) {
    choice->reason = std::string(s.message());
    return outs;
  }
  choice->image_bytes = whole.LargestIntermediate(outputs_);
  int64_t k = SliceImages(n, choice->image_bytes);
  if (k >= n) {  // (nor groups: too little work to share out)
    choice->reason = absl::StrCat("the whole batch's largest intermediate fits the cache (",
                                  static_cast<int64_t>(choice->image_bytes * n), " bytes)");
    return outs;
  }
  // Slices read the weights once each; the whole batch writes and reads back
  // its intermediates past the cache. Slices when they move clearly fewer
  // bytes (kSliceMargin: near even, the whole batch measured as fast or
  // faster on one core: ResNet-18, 352 MB of intermediates against 327 MB of
  // weights).
  const double spilled = 2 * static_cast<double>(n) * whole.IntermediatesOver(kSliceBytes, outputs_);
  const double reread = static_cast<double>(n / k - 1) * whole.WeightBytes();
  if (spilled <= kSliceMargin * reread) {
    choice->reason = absl::StrCat(
        "slices of ", k, " would keep ", static_cast<int64_t>(spilled * 1e-6),
        " MB of intermediates in the cache but read ", static_cast<int64_t>(reread * 1e-6),
        " MB of weights again (slices need ", kSliceMargin, "x)");
    k = n;
  }
  // On W threads, W groups of consecutive images, each a chain of kernels a
  // replay runs beside the others (a slice divides a group), also where
  // slices do not pay for the cache: each group reads the weights on its
  // own core (2 threads, batch 8: ResNet-18 1.22x, DeepLabV3 1.15x, FCN and
  // Wide ResNet 1.05x faster).
  if (groups > 1 && n % groups == 0) {
    const int64_t per = n / groups;
    k = std::min(k, per);
    while (per % k != 0) --k;
  }
  if (k >= n) return outs;
  BatchTracker slice(k, names);
  absl::StatusOr<std::vector<OnnxValue>> part = build(SliceInputs(inputs, batched, 0, k), &slice);
  s = part.ok() ? slice.Separable(outputs_) : part.status();
  if (s.ok()) s = whole.SameImages(slice);
  if (!s.ok()) {
    choice->reason = absl::StrCat("a slice of ", k, " images builds otherwise: ", s.message());
    return outs;
  }
  choice->images = k;
  choice->groups = std::min(groups, n / k);
  choice->reason.clear();
  *first = std::move(*part);
  return outs;
}

absl::StatusOr<std::vector<OnnxValue>> BatchSplitter::Run(const std::vector<OnnxValue>& inputs,
                                                          const Build& build) const {
  std::vector<bool> batched;
  const int64_t n = BatchOf(inputs, &batched);
  if (n == 0) return build(inputs, nullptr);
  const Policy policy = policy_();
  if (!policy.off.empty()) return build(inputs, nullptr);
  const std::string key = Key(inputs, policy);
  std::optional<Choice> known;
  {
    absl::MutexLock lock(&mu_);
    auto it = choices_.find(key);
    if (it != choices_.end()) known = it->second;
  }
  std::vector<OnnxValue> first;  // slice 0 as Choose built it
  if (!known) {
    Choice c;
    ASSIGN_OR_RETURN(std::vector<OnnxValue> outs,
                     Choose(inputs, batched, n, policy.groups, build, &c, &first));
    {
      absl::MutexLock lock(&mu_);
      Remember(key, c);
    }
    if (c.images >= n) return outs;
    known = c;
  }
  if (known->images >= n) return build(inputs, nullptr);
  const int64_t k = known->images, slices = n / k, groups = known->groups;
  std::vector<std::vector<Tensor>> parts(outputs_.size());
  int64_t group_start = 0;  // the first slice of the group being built
  for (int64_t start = 0, s = 0; start < n; start += k, ++s) {
    std::vector<OnnxValue> outs;
    if (start == 0 && !first.empty()) {
      outs = std::move(first);
    } else {
      ASSIGN_OR_RETURN(outs, build(SliceInputs(inputs, batched, start, k), nullptr));
    }
    if (outs.size() != outputs_.size())
      return absl::InternalError("a batch slice's graph gave another number of outputs");
    for (size_t o = 0; o < outs.size(); ++o) {
      if (!outs[o].is_tensor() || !outs[o].tensor)
        return absl::InternalError(absl::StrCat("output '", outputs_[o],
                                                "' of a batch slice is not a device tensor"));
      parts[o].push_back(*outs[o].tensor);
    }
    // The end of a group: realize its slices (their own schedule and
    // buffers) before the next group is built.
    if (groups > 1 && (s + 1 == slices || (s + 1) * groups / slices != s * groups / slices)) {
      std::vector<Tensor*> group;
      for (std::vector<Tensor>& p : parts)
        for (int64_t j = group_start; j <= s; ++j) group.push_back(&p[j]);
      RETURN_IF_ERROR(Tensor::RealizeAll(group));
      group_start = s + 1;
    }
  }
  std::vector<OnnxValue> result;
  for (const std::vector<Tensor>& p : parts) result.push_back(OnnxValue::FromTensor(Tensor::Cat(p, 0)));
  return result;
}

}  // namespace kiln
