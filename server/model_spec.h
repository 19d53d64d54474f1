// ModelSpec: a model's validated configuration, from Triton's config.pbtxt
// text format (the subset kiln supports, proto/model_config.proto) or
// derived from the model's own input / output signature.
//
//   ASSIGN_OR_RETURN(inference::ModelConfig cfg, ParseModelConfigText(text, "m/config.pbtxt"));
//   ASSIGN_OR_RETURN(ModelSpec spec, ModelSpecFromConfig(cfg, "m"));
//
// Everything here is a pure function of its arguments (thread-safe).
#ifndef KILN_SERVER_MODEL_SPEC_H_
#define KILN_SERVER_MODEL_SPEC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/base/dtype.h"
#include "proto/model_config.pb.h"

namespace kiln {

// One input or output. `dims` excludes the batch dim when the model batches
// (max_batch_size > 0); -1 marks a variable dim.
struct TensorSpec {
  std::string name;
  DType dtype = dtypes::kFloat32;
  std::vector<int64_t> dims;
};

struct QueuePolicy {
  bool delay_on_timeout = false;               // TimeoutAction DELAY (else REJECT)
  absl::Duration default_timeout = absl::ZeroDuration();  // zero: none
  bool allow_timeout_override = false;
  uint32_t max_queue_size = 0;                 // 0: unbounded
};

struct BatchingSpec {
  bool dynamic = false;                // dynamic_batching present
  std::vector<int64_t> preferred;      // ascending, each in [1, max_batch_size]
  absl::Duration max_queue_delay = absl::ZeroDuration();
  int priority_levels = 1;             // >= 1; level 1 is the highest
  int default_priority = 1;
  QueuePolicy default_policy;
  std::map<int, QueuePolicy> level_policy;
  const QueuePolicy& PolicyFor(int level) const {
    auto it = level_policy.find(level);
    return it == level_policy.end() ? default_policy : it->second;
  }
};

struct WarmupInput {
  DType dtype = dtypes::kFloat32;
  std::vector<int64_t> dims;  // without the batch dim
  bool random = false;        // else zeros
};

struct WarmupSpec {
  std::string name;
  int64_t batch_size = 1;
  std::map<std::string, WarmupInput> inputs;
  int count = 1;
};

struct VersionPolicy {
  enum Kind { kLatest, kAll, kSpecific } kind = kLatest;
  uint32_t latest = 1;
  std::set<int64_t> specific;
  // The versions to serve out of those present on disk.
  std::vector<int64_t> Select(const std::vector<int64_t>& available) const;
};

struct ModelSpec {
  std::string name;
  std::string platform;        // as reported in metadata ("onnxruntime_onnx")
  int64_t max_batch_size = 0;  // 0: no batch dim
  std::vector<TensorSpec> inputs, outputs;
  BatchingSpec batching;
  int instance_count = 1;
  // CPU threads of each instance (parameters "intra_op_thread_count");
  // 0: not set (InstanceThreads decides).
  int threads = 0;
  std::string device;          // "" = the server's --device
  std::string model_filename = "model.onnx";
  VersionPolicy version_policy;
  std::vector<WarmupSpec> warmups;
  bool derived = false;        // no config.pbtxt: derived from the model
  inference::ModelConfig config;  // normalized config (ModelConfig RPC)

  const TensorSpec* FindInput(const std::string& name) const;
  const TensorSpec* FindOutput(const std::string& name) const;
  // Full shape of a tensor for batch size `batch` (batch ignored when the
  // model does not batch).
  std::vector<int64_t> FullDims(const TensorSpec& t, int64_t batch) const;
};

// Parses config.pbtxt text. A field kiln does not support (or a syntax
// error) gives InvalidArgument naming the file, line and field.
absl::StatusOr<inference::ModelConfig> ParseModelConfigText(const std::string& text,
                                                            const std::string& filename);

// Validates a parsed config. `dir_name` is the model's directory name (the
// config's name must match it when set).
absl::StatusOr<ModelSpec> ModelSpecFromConfig(const inference::ModelConfig& config,
                                              const std::string& dir_name);

// The signature of a model file, as seen by the backend.
struct ModelSignature {
  std::vector<TensorSpec> inputs, outputs;  // full dims (batch dim included)
};

// Checks `spec` against the model's own signature and completes what the
// config left out: with no inputs / outputs listed, they are taken from the
// model (batch dim stripped when max_batch_size > 0). Listed tensors must
// exist in the model with the same dtype and compatible dims.
absl::Status CompleteSpecFromModel(const ModelSignature& sig, ModelSpec* spec);

// The config of a model directory without config.pbtxt: every input and
// output of the model; batching (max_batch_size `default_max_batch`, dynamic
// batching on) when every input and output has a variable first dim.
absl::StatusOr<ModelSpec> DeriveModelSpec(const ModelSignature& sig, const std::string& name,
                                          int64_t default_max_batch);

// The CPU threads each of `spec`'s instances runs its kernels on, on a
// machine whose CPU device has `cores` threads: the config's
// intra_op_thread_count when set; else, with several instances, an equal
// share of the cores each (at least 1), since instances sharing one pool
// served MobileNetV2 at 0.7x the rate of one thread each (BENCHMARKS.md);
// else 0, the device's own pool.
int InstanceThreads(const ModelSpec& spec, int cores);

// Triton DataType <-> kiln DType. TYPE_STRING and TYPE_INVALID have no DType.
std::optional<DType> DTypeFromConfig(inference::DataType t);
inference::DataType ConfigDataType(DType t);

// Overflow-checked element count of `dims` (all >= 0); nullopt on overflow
// or a negative dim.
std::optional<int64_t> CheckedNumel(const std::vector<int64_t>& dims);

}  // namespace kiln

#endif  // KILN_SERVER_MODEL_SPEC_H_
