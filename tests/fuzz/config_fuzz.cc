// libFuzzer target: config.pbtxt as kilnd reads it at load. The bytes are
// the file's text: ParseModelConfigText, ModelSpecFromConfig (dir name
// "simple"), then, as ModelManager::LoadVersion does once the model file is
// loaded, CompleteSpecFromModel against two fixed model signatures: the one
// of models/simple (so the shipped config and its variants get through)
// and one without a batch dim. The version policy picks from a fixed list.
//
// Nothing may crash or abort; on top of that, a spec that passes is checked
// against what the batcher, the executor and the decoder take for granted
// (FUZZ_CHECK in CheckSpec).
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/model_spec.h"
#include "tests/fuzz/fuzz_util.h"

namespace kiln::fuzz {
namespace {

// models/simple: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = Relu(INPUT0 * INPUT1).
ModelSignature SimpleSignature() {
  ModelSignature s;
  s.inputs = {{"INPUT0", dtypes::kFloat32, {-1, 16}}, {"INPUT1", dtypes::kFloat32, {-1, 16}}};
  s.outputs = {{"OUTPUT0", dtypes::kFloat32, {-1, 16}}, {"OUTPUT1", dtypes::kFloat32, {-1, 16}}};
  return s;
}

// A model that cannot batch (fixed first dims), other dtypes, a scalar.
ModelSignature FixedSignature() {
  ModelSignature s;
  s.inputs = {{"INPUT0", dtypes::kInt64, {2, -1}}, {"INPUT1", dtypes::kUInt8, {}}};
  s.outputs = {{"OUTPUT0", dtypes::kFloat16, {2, 3}}};
  return s;
}

bool ValidDims(const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d != -1 && d < 1) return false;
  return true;
}

// What the server relies on once a spec is accepted.
void CheckSpec(const ModelSpec& s) {
  FUZZ_CHECK(s.max_batch_size >= 0 && s.max_batch_size <= (1 << 16));
  // Executor and Batcher start instance_count runners and worker threads.
  FUZZ_CHECK(s.instance_count >= 1 && s.instance_count <= 64);
  const BatchingSpec& b = s.batching;
  FUZZ_CHECK(b.priority_levels >= 1 && b.priority_levels <= 1000);
  FUZZ_CHECK(b.default_priority >= 1 && b.default_priority <= b.priority_levels);
  for (int64_t p : b.preferred) FUZZ_CHECK(p >= 1 && p <= s.max_batch_size);
  for (const auto& [level, policy] : b.level_policy)
    FUZZ_CHECK(level >= 1 && level <= b.priority_levels);
  FUZZ_CHECK(b.max_queue_delay >= absl::ZeroDuration());
  for (const TensorSpec& t : s.inputs) FUZZ_CHECK(!t.name.empty() && ValidDims(t.dims));
  for (const TensorSpec& t : s.outputs) FUZZ_CHECK(!t.name.empty() && ValidDims(t.dims));
  FUZZ_CHECK(!s.model_filename.empty() && s.model_filename.find('/') == std::string::npos);
  for (const WarmupSpec& w : s.warmups) {
    FUZZ_CHECK(w.batch_size >= 1);
    FUZZ_CHECK(s.max_batch_size == 0 ? w.batch_size == 1 : w.batch_size <= s.max_batch_size);
    FUZZ_CHECK(w.count >= 1 && w.count <= 100);
  }
}

// After CompleteSpecFromModel: every input is in the model, every warm-up
// names each input with dims that fit it (Executor::Warmup reads them with
// .at()).
void CheckCompleted(const ModelSpec& s, const ModelSignature& sig) {
  CheckSpec(s);
  FUZZ_CHECK(s.inputs.size() == sig.inputs.size());
  FUZZ_CHECK(!s.outputs.empty());
  for (const WarmupSpec& w : s.warmups)
    for (const TensorSpec& t : s.inputs) {
      auto it = w.inputs.find(t.name);
      FUZZ_CHECK(it != w.inputs.end());
      FUZZ_CHECK(it->second.dims.size() == t.dims.size());
      for (int64_t d : it->second.dims) FUZZ_CHECK(d >= 1);
    }
  FUZZ_CHECK(s.config.input_size() == static_cast<int>(s.inputs.size()));
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;  // NOLINT: a fuzz entry point, two lines of kiln calls
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<inference::ModelConfig> config = ParseModelConfigText(text, "simple/config.pbtxt");
  if (!config.ok()) return 0;
  absl::StatusOr<ModelSpec> spec = ModelSpecFromConfig(*config, "simple");
  if (!spec.ok()) return 0;
  fuzz::CheckSpec(*spec);
  (void)spec->version_policy.Select({1, 2, 3, 7, 1000});
  for (const ModelSignature& sig : {fuzz::SimpleSignature(), fuzz::FixedSignature()}) {
    ModelSpec completed = *spec;
    if (CompleteSpecFromModel(sig, &completed).ok()) fuzz::CheckCompleted(completed, sig);
  }
  return 0;
}
