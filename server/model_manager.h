// ModelManager: which models are loaded, and loading / unloading them.
//
// A LoadedModel is one ready model version: its spec, backend, executor
// (one runner per instance) and batcher. Request handlers hold it through
// shared_ptr while their request is in flight, so unloading never frees a
// model under a running request: Unload removes the versions from the
// serving map (new requests see UNAVAILABLE), then drains each batcher
// (queued requests still run) before dropping it. A reload (Load of a
// loaded model) loads the new versions first, swaps them in, then drains
// the old ones; a failed reload keeps the old versions serving.
//
// Control modes: kNone loads every model of the repository at Start and
// refuses Load / Unload; kExplicit loads only `startup_models` at Start and
// accepts Load / Unload.
//
// Thread safety: thread-safe. Loads and unloads of one model are
// serialized by a per-model lock; those of different models run in
// parallel, so a slow (or stuck) load of one model never holds up another.
// Lookups (Get, Index) never wait for a load in progress. StopAll waits for
// the loads in progress, which then find the manager stopped.
#ifndef KILN_SERVER_MODEL_MANAGER_H_
#define KILN_SERVER_MODEL_MANAGER_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/batcher.h"
#include "server/clock.h"
#include "server/executor.h"
#include "server/metrics.h"
#include "server/model_spec.h"
#include "server/model_stats.h"
#include "server/repository.h"
#include "server/runner.h"

namespace kiln {

enum class ControlMode { kNone, kExplicit };

class LoadedModel {
 public:
  ~LoadedModel();
  const ModelSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  int64_t version() const { return version_; }
  const std::string& version_string() const { return version_str_; }
  ModelStats& stats() { return stats_; }
  ModelMetrics* metrics() const { return metrics_.get(); }
  Executor& executor() { return *executor_; }
  // Queues a validated request (UNAVAILABLE when draining or full).
  absl::Status Enqueue(RequestPtr r, absl::Duration requested_timeout);
  size_t pending() const;
  // Wakes the batcher (after a cancellation).
  void Wake();
  // Stops accepting and waits for queued and running requests.
  void Drain();

 private:
  friend class ModelManager;
  LoadedModel() = default;

  ModelSpec spec_;
  int64_t version_ = 0;
  std::string version_str_;
  std::unique_ptr<ModelBackend> backend_;
  std::shared_ptr<ModelMetrics> metrics_;
  ModelStats stats_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Batcher> batcher_;  // stopped before executor_ goes
};

class ModelManager {
 public:
  struct Options {
    std::string repository = "models";
    ControlMode mode = ControlMode::kNone;
    std::vector<std::string> startup_models;  // kExplicit only
    std::string device = "CPU";               // KIND_AUTO / KIND_CPU -> CPU
    JitLimits jit;                            // per instance
    // The CPU device's threads, shared out among a model's instances
    // (InstanceThreads); 0: unknown, instances share the device's pool
    // unless their config sets intra_op_thread_count.
    int cpu_threads = 0;
    int64_t default_max_batch = 8;            // for derived configs
    bool pad_to_captured = true;
    // A load (file, graph, warm-up) still running after this long fails
    // with DEADLINE_EXCEEDED and leaves the model UNAVAILABLE (a reload
    // keeps the old versions serving); it goes on in the background, its
    // result is discarded, and loads of that model are refused until it
    // ends. InfiniteDuration: no limit.
    absl::Duration load_timeout = absl::InfiniteDuration();
  };
  struct IndexEntry {
    std::string name, version, state, reason;
  };

  // `loader`, `metrics` (may be null) and `clock` must outlive the manager.
  ModelManager(Options options, BackendLoader* loader, Metrics* metrics, Clock* clock);
  ~ModelManager();

  // Loads the startup models. A model that fails to load is left
  // UNAVAILABLE with its reason; the returned status is the first failure.
  absl::Status Start();

  // The ready model version; `version` empty = the highest ready one.
  // NOT_FOUND for an unknown model or version, UNAVAILABLE for a known
  // model that is not ready.
  absl::StatusOr<std::shared_ptr<LoadedModel>> Get(const std::string& name,
                                                   const std::string& version) const;
  // Every ready version of every model (or of `name` if not empty).
  std::vector<std::shared_ptr<LoadedModel>> Ready(const std::string& name = "") const;
  std::vector<int64_t> ReadyVersions(const std::string& name) const;

  absl::Status Load(const std::string& name);
  absl::Status Unload(const std::string& name);
  // Drains and unloads everything (server shutdown).
  void StopAll();
  // Models with a load or unload running now, timed-out loads included.
  std::vector<std::string> Busy() const;

  std::vector<IndexEntry> Index(bool ready_only) const;
  ControlMode mode() const { return options_.mode; }
  const ModelRepository& repository() const { return repository_; }

 private:
  struct Entry {
    std::string state = "UNAVAILABLE";
    std::string reason;
    std::map<int64_t, std::shared_ptr<LoadedModel>> versions;
  };

  // Holds the lock of one model (see busy_) while it lives.
  class ModelLock;
  // One load run on its own thread, under options_.load_timeout.
  struct LoadCall;

  // Loads `name` under the load timeout (takes its ModelLock).
  absl::Status LoadTimed(const std::string& name);
  // The thread of a timed load: loads, then settles what an abandoned one
  // leaves behind.
  struct LoadThreads;
  void RunTimedLoad(const std::string& name, std::shared_ptr<LoadCall> call,
                    std::shared_ptr<LoadThreads> threads);

  // Loads `name` (the caller holds its ModelLock); a failure (also an
  // exception such as std::bad_alloc) leaves it UNAVAILABLE with the
  // reason, or keeps its old versions serving.
  // `call` (may be null) is the timed load this runs for: once its caller
  // gave up, the load serves nothing.
  absl::Status LoadLocked(const std::string& name, LoadCall* call);
  absl::Status LoadModelLocked(const std::string& name, LoadCall* call);
  absl::StatusOr<std::shared_ptr<LoadedModel>> LoadVersion(const ModelSpec& base,
                                                           int64_t version);
  absl::StatusOr<std::string> ResolveDevice(const ModelSpec& spec) const;
  void SetState(const std::string& name, const std::string& state, const std::string& reason);

  const Options options_;
  ModelRepository repository_;
  BackendLoader* const loader_;
  Metrics* const metrics_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  std::map<std::string, Entry> models_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // The per-model locks: names of the models with a Load / Unload in
  // progress; busy_cv_ is signalled when one ends.
  std::set<std::string> busy_ ABSL_GUARDED_BY(mu_);
  absl::CondVar busy_cv_;
  // Loads past their timeout still running, per model.
  std::map<std::string, int> abandoned_ ABSL_GUARDED_BY(mu_);
  // The threads of timed loads still running (shared with them).
  const std::shared_ptr<LoadThreads> load_threads_;
};

}  // namespace kiln

#endif  // KILN_SERVER_MODEL_MANAGER_H_
