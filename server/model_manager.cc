#include "server/model_manager.h"

#include <sys/stat.h>

#include <new>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "engine/base/status.h"
#include "server/echo.h"

namespace kiln {

LoadedModel::~LoadedModel() {
  if (batcher_) batcher_->Stop(Batcher::StopMode::kAbort);
  batcher_.reset();
  executor_.reset();
}

absl::Status LoadedModel::Enqueue(RequestPtr r, absl::Duration requested_timeout) {
  return batcher_->Enqueue(std::move(r), requested_timeout);
}

size_t LoadedModel::pending() const { return batcher_ ? batcher_->pending() : 0; }

void LoadedModel::Wake() {
  if (batcher_) batcher_->Wake();
}

void LoadedModel::Drain() {
  if (batcher_) batcher_->Stop(Batcher::StopMode::kDrain);
  if (metrics_) metrics_->ready->Set(0);
}

// Waits until no Load / Unload of `name` is in progress, then marks it busy
// until destroyed.
class ModelManager::ModelLock {
 public:
  ModelLock(ModelManager* manager, const std::string& name) : manager_(manager), name_(name) {
    absl::MutexLock l(&manager_->mu_);
    while (manager_->busy_.count(name_)) manager_->busy_cv_.Wait(&manager_->mu_);
    manager_->busy_.insert(name_);
  }
  ~ModelLock() {
    absl::MutexLock l(&manager_->mu_);
    manager_->busy_.erase(name_);
    manager_->busy_cv_.SignalAll();
  }
  ModelLock(const ModelLock&) = delete;
  ModelLock& operator=(const ModelLock&) = delete;

 private:
  ModelManager* const manager_;
  const std::string name_;
};

// The running threads of timed loads. Shared with them: the last one counts
// down after StopAll stopped waiting, when the manager may be gone.
struct ModelManager::LoadThreads {
  absl::Mutex mu;
  int running ABSL_GUARDED_BY(mu) = 0;
  void Add() {
    absl::MutexLock l(&mu);
    ++running;
  }
  void Done() {
    absl::MutexLock l(&mu);
    --running;
  }
  void AwaitNone() {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(+[](int* n) { return *n == 0; }, &running));
  }
};

struct ModelManager::LoadCall {
  absl::Time deadline;    // the load commits only before it (real time, as the caller's wait)
  absl::Notification done;
  absl::Status status;    // set before `done`
  bool abandoned = false;  // (mu_) past the deadline: the result is discarded
  bool committed = false;  // (mu_) the loaded versions were swapped in
};

ModelManager::ModelManager(Options options, BackendLoader* loader, Metrics* metrics, Clock* clock)
    : options_(std::move(options)),
      repository_(options_.repository),
      loader_(loader),
      metrics_(metrics),
      clock_(clock),
      load_threads_(std::make_shared<LoadThreads>()) {}

ModelManager::~ModelManager() { StopAll(); }

absl::Status ModelManager::Start() {
  std::vector<std::string> names;
  if (options_.mode == ControlMode::kNone) {
    ASSIGN_OR_RETURN(names, repository_.ListModels());
  } else {
    names = options_.startup_models;
  }
  {
    absl::MutexLock l(&mu_);
    for (const std::string& n : names) models_[n].reason = "not loaded yet";
  }
  absl::Status first;
  for (const std::string& n : names) {
    absl::Status s = LoadTimed(n);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

void ModelManager::RunTimedLoad(const std::string& name, std::shared_ptr<LoadCall> call,
                                std::shared_ptr<LoadThreads> threads) {
  absl::Status s;
  {
    ModelLock lock(this, name);
    s = LoadLocked(name, call.get());
  }
  call->status = s;
  call->done.Notify();
  {
    absl::MutexLock l(&mu_);
    if (call->abandoned) {
      if (--abandoned_[name] == 0) abandoned_.erase(name);
      Entry& e = models_[name];
      if (e.versions.empty()) e.state = "UNAVAILABLE";
      e.reason = absl::StrCat("the last load passed the load timeout (",
                              absl::FormatDuration(options_.load_timeout), ") and was discarded",
                              absl::IsDeadlineExceeded(s) || s.ok()
                                  ? ""
                                  : absl::StrCat("; it then failed: ", s.message()));
    }
  }
  threads->Done();  // the last use of the manager is above
}

absl::Status ModelManager::LoadTimed(const std::string& name) {
  if (options_.load_timeout == absl::InfiniteDuration()) {
    ModelLock lock(this, name);
    return LoadLocked(name, nullptr);
  }
  auto call = std::make_shared<LoadCall>();
  call->deadline = absl::Now() + options_.load_timeout;
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return absl::UnavailableError("the server is shutting down");
    if (abandoned_.count(name))
      return absl::UnavailableError(absl::StrCat(
          "model '", Echo(name), "': a load of it that passed the load timeout is still "
          "running; try again when it has ended (the repository index shows its state)"));
    load_threads_->Add();  // under mu_: StopAll, which sets stopped_, then waits for it
  }
  // StopAll (and so the destructor) waits for the thread to count down.
  std::thread worker;
  try {
    worker = std::thread(&ModelManager::RunTimedLoad, this, name, call, load_threads_);
  } catch (const std::system_error& e) {
    load_threads_->Done();
    return absl::ResourceExhaustedError(
        absl::StrCat("loading ", Echo(name), ": cannot start a thread (", e.what(), ")"));
  }
  worker.detach();
  if (call->done.WaitForNotificationWithTimeout(options_.load_timeout)) return call->status;
  const std::string why = absl::StrCat(
      "loading took longer than the load timeout (", absl::FormatDuration(options_.load_timeout),
      "); the load goes on in the background and its result will be discarded");
  {
    absl::MutexLock l(&mu_);
    if (!call->committed && !call->abandoned && !call->done.HasBeenNotified()) {
      call->abandoned = true;
      ++abandoned_[name];
      Entry& e = models_[name];
      if (e.versions.empty()) e.state = "UNAVAILABLE";
      e.reason = why;
      return absl::DeadlineExceededError(absl::StrCat("model '", Echo(name), "': ", why));
    }
  }
  call->done.WaitForNotification();  // it finished just now
  return call->status;
}

void ModelManager::SetState(const std::string& name, const std::string& state,
                            const std::string& reason) {
  absl::MutexLock l(&mu_);
  Entry& e = models_[name];
  e.state = state;
  e.reason = reason;
}

absl::StatusOr<std::string> ModelManager::ResolveDevice(const ModelSpec& spec) const {
  if (spec.device.empty()) return options_.device;
  if (spec.device == "CPU") return std::string("CPU");
  // KIND_GPU
  if (options_.device == "CPU" || options_.device == "INTERP")
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", spec.name, "' asks for KIND_GPU instances but kilnd runs with --device=",
        options_.device));
  return options_.device;
}

absl::StatusOr<std::shared_ptr<LoadedModel>> ModelManager::LoadVersion(const ModelSpec& base,
                                                                       int64_t version) {
  absl::Time start = clock_->Now();
  std::shared_ptr<LoadedModel> m(new LoadedModel());
  m->version_ = version;
  m->version_str_ = absl::StrCat(version);
  std::string path = repository_.ModelFile(base.name, version, base.model_filename);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat("model '", base.name, "' version ", version,
                                            ": no model file ", path));
  // A FIFO would block the load (and every load after it), a device such as
  // /dev/zero would never end.
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat("model '", base.name, "' version ", version,
                                                   ": ", path, " is not a regular file"));
  ASSIGN_OR_RETURN(std::string device, ResolveDevice(base));
  ASSIGN_OR_RETURN(m->backend_, loader_->Load(path, device));
  if (base.derived) {
    ASSIGN_OR_RETURN(m->spec_, DeriveModelSpec(m->backend_->signature(), base.name,
                                               options_.default_max_batch));
  } else {
    m->spec_ = base;
    RETURN_IF_ERROR(CompleteSpecFromModel(m->backend_->signature(), &m->spec_));
  }
  std::vector<std::unique_ptr<ModelRunner>> runners;
  RunnerOptions ro;
  ro.jit = options_.jit;
  ro.threads = InstanceThreads(m->spec_, options_.cpu_threads);
  for (int i = 0; i < m->spec_.instance_count; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> r, m->backend_->NewRunner(ro));
    runners.push_back(std::move(r));
  }
  if (metrics_) m->metrics_ = metrics_->ForModel(base.name, m->version_str_);
  Executor::Options eo;
  eo.max_captures = options_.jit.max_captures;
  eo.pad_to_captured = options_.pad_to_captured;
  m->executor_ = std::make_unique<Executor>(&m->spec_, std::move(runners), m->metrics_,
                                            &m->stats_, clock_, eo);
  RETURN_IF_ERROR(m->executor_->Warmup());
  Executor* exec = m->executor_.get();
  ModelMetrics* mm = m->metrics_.get();
  m->batcher_ = std::make_unique<Batcher>(
      m->spec_.batching, m->spec_.max_batch_size, m->spec_.instance_count, clock_,
      [exec](std::vector<RequestPtr> batch, int instance) {
        exec->Execute(std::move(batch), instance);
      },
      [mm](size_t pending) {
        if (mm) mm->pending->Set(static_cast<double>(pending));
      });
  if (mm) {
    mm->load_seconds->Set(absl::ToDoubleSeconds(clock_->Now() - start));
    mm->ready->Set(1);
  }
  return m;
}

absl::Status ModelManager::LoadLocked(const std::string& name, LoadCall* call) {
  // Sizes are checked before they are allocated; an allocation that still
  // fails must not leave the model LOADING (nor reach the RPC as UNKNOWN).
  absl::Status s;
  try {
    return LoadModelLocked(name, call);
  } catch (const std::bad_alloc& e) {
    s = absl::ResourceExhaustedError(
        absl::StrCat("loading ", Echo(name), ": out of memory (", e.what(), ")"));
  } catch (const std::length_error& e) {
    s = absl::ResourceExhaustedError(
        absl::StrCat("loading ", Echo(name), ": out of memory (", e.what(), ")"));
  } catch (const std::exception& e) {
    s = absl::InternalError(absl::StrCat("loading ", Echo(name), ": ", e.what()));
  }
  absl::MutexLock l(&mu_);
  Entry& e = models_[name];
  if (e.versions.empty()) e.state = "UNAVAILABLE";
  e.reason = std::string(s.message());
  return s;
}

absl::Status ModelManager::LoadModelLocked(const std::string& name, LoadCall* call) {
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return absl::UnavailableError("the server is shutting down");
    // Timed out while waiting for another load of the model: don't start.
    if (call != nullptr && call->abandoned)
      return absl::DeadlineExceededError("the load timed out before it started");
  }
  if (!ModelRepository::ValidModelName(name) || !repository_.HasModel(name))
    return absl::NotFoundError(absl::StrCat("model '", Echo(name),
                                            "' is not in the repository ", repository_.root()));
  bool had_versions;
  {
    absl::MutexLock l(&mu_);
    Entry& e = models_[name];
    had_versions = !e.versions.empty();
    if (!had_versions) {
      e.state = "LOADING";
      e.reason = "";
    }
  }
  auto fail = [&](const absl::Status& s) {
    absl::MutexLock l(&mu_);
    Entry& e = models_[name];
    if (e.versions.empty()) e.state = "UNAVAILABLE";
    e.reason = std::string(s.message());
    return s;
  };
  absl::StatusOr<std::optional<std::string>> text = repository_.ReadConfig(name);
  if (!text.ok()) return fail(text.status());
  ModelSpec base;
  if (text->has_value()) {
    auto config = ParseModelConfigText(**text, repository_.ConfigPath(name));
    if (!config.ok()) return fail(config.status());
    auto spec = ModelSpecFromConfig(*config, name);
    if (!spec.ok()) return fail(spec.status());
    base = std::move(*spec);
  } else {
    base.name = name;
    base.derived = true;
  }
  auto available = repository_.ListVersions(name);
  if (!available.ok()) return fail(available.status());
  std::vector<int64_t> versions = base.version_policy.Select(*available);
  if (versions.empty())
    return fail(absl::NotFoundError(absl::StrCat("model '", name,
                                                 "' has no version directory to serve")));
  std::map<int64_t, std::shared_ptr<LoadedModel>> loaded;
  for (int64_t v : versions) {
    auto m = LoadVersion(base, v);
    if (!m.ok()) {
      for (auto& [ver, lm] : loaded) lm->Drain();
      return fail(absl::Status(m.status().code(),
                               absl::StrCat("loading ", name, " version ", v, ": ",
                                            m.status().message())));
    }
    loaded[v] = std::move(*m);
  }
  std::map<int64_t, std::shared_ptr<LoadedModel>> old;
  bool stopped, abandoned;
  {
    absl::MutexLock l(&mu_);
    stopped = stopped_;  // StopAll ran during the load: serve nothing
    // Nor does a load that took longer than the timeout, whether or not its
    // caller has woken up to that yet (it may be descheduled past it).
    if (call != nullptr && !call->abandoned && absl::Now() > call->deadline) {
      call->abandoned = true;
      ++abandoned_[name];
    }
    abandoned = call != nullptr && call->abandoned;
    if (!stopped && !abandoned) {
      Entry& e = models_[name];
      old.swap(e.versions);
      e.versions = std::move(loaded);
      e.state = "READY";
      e.reason = "";
      if (call != nullptr) call->committed = true;
    }
  }
  for (auto& [v, m] : (stopped || abandoned) ? loaded : old) m->Drain();
  if (stopped) return absl::UnavailableError("the server is shutting down");
  if (abandoned) return absl::DeadlineExceededError("the load timed out; its result is discarded");
  return absl::OkStatus();
}

absl::Status ModelManager::Load(const std::string& name) {
  if (options_.mode != ControlMode::kExplicit)
    return absl::FailedPreconditionError(
        "model control mode is 'none': restart kilnd with --model-control-mode=explicit to "
        "load and unload models over the API");
  if (!ModelRepository::ValidModelName(name))
    return absl::NotFoundError(absl::StrCat("model '", Echo(name), "' is not in the repository"));
  return LoadTimed(name);
}

absl::Status ModelManager::Unload(const std::string& name) {
  if (options_.mode != ControlMode::kExplicit)
    return absl::FailedPreconditionError(
        "model control mode is 'none': restart kilnd with --model-control-mode=explicit to "
        "load and unload models over the API");
  if (!ModelRepository::ValidModelName(name))
    return absl::NotFoundError(absl::StrCat("model '", Echo(name), "' is not in the repository"));
  ModelLock lock(this, name);
  std::map<int64_t, std::shared_ptr<LoadedModel>> old;
  {
    absl::MutexLock m(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      if (repository_.HasModel(name)) return absl::OkStatus();  // not loaded: nothing to do
      return absl::NotFoundError(absl::StrCat("model '", Echo(name), "' is not in the repository"));
    }
    old.swap(it->second.versions);
    it->second.state = old.empty() ? it->second.state : "UNLOADING";
  }
  for (auto& [v, m] : old) m->Drain();
  SetState(name, "UNAVAILABLE", "unloaded");
  return absl::OkStatus();
}

std::vector<std::string> ModelManager::Busy() const {
  absl::MutexLock l(&mu_);
  std::set<std::string> names(busy_.begin(), busy_.end());
  for (const auto& [name, n] : abandoned_) names.insert(name);
  return std::vector<std::string>(names.begin(), names.end());
}

void ModelManager::StopAll() {
  std::vector<std::shared_ptr<LoadedModel>> all;
  {
    absl::MutexLock m(&mu_);
    stopped_ = true;
  }
  // Loads and unloads in progress end first (a load then finds the manager
  // stopped and serves nothing); timed loads run on threads of their own.
  load_threads_->AwaitNone();
  {
    absl::MutexLock m(&mu_);
    while (!busy_.empty()) busy_cv_.Wait(&mu_);
    for (auto& [name, e] : models_) {
      for (auto& [v, lm] : e.versions) all.push_back(lm);
      e.versions.clear();
      e.state = "UNAVAILABLE";
      e.reason = "server shut down";
    }
  }
  for (auto& m : all) m->Drain();
}

absl::StatusOr<std::shared_ptr<LoadedModel>> ModelManager::Get(const std::string& name,
                                                               const std::string& version) const {
  absl::MutexLock l(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    if (repository_.HasModel(name))
      return absl::UnavailableError(absl::StrCat("model '", Echo(name), "' is not loaded"));
    return absl::NotFoundError(absl::StrCat("unknown model '", Echo(name), "'"));
  }
  const Entry& e = it->second;
  if (e.versions.empty())
    return absl::UnavailableError(absl::StrCat("model '", Echo(name), "' is not ready (",
                                               e.state, e.reason.empty() ? "" : ": ", e.reason,
                                               ")"));
  if (version.empty()) return e.versions.rbegin()->second;
  int64_t v;
  if (!absl::SimpleAtoi(version, &v))
    return absl::NotFoundError(
        absl::StrCat("model '", Echo(name), "' has no version '", Echo(version), "'"));
  auto vit = e.versions.find(v);
  if (vit == e.versions.end())
    return absl::NotFoundError(
        absl::StrCat("model '", Echo(name), "' has no ready version ", v));
  return vit->second;
}

std::vector<std::shared_ptr<LoadedModel>> ModelManager::Ready(const std::string& name) const {
  absl::MutexLock l(&mu_);
  std::vector<std::shared_ptr<LoadedModel>> out;
  for (const auto& [n, e] : models_) {
    if (!name.empty() && n != name) continue;
    for (const auto& [v, m] : e.versions) out.push_back(m);
  }
  return out;
}

std::vector<int64_t> ModelManager::ReadyVersions(const std::string& name) const {
  absl::MutexLock l(&mu_);
  std::vector<int64_t> out;
  auto it = models_.find(name);
  if (it != models_.end())
    for (const auto& [v, m] : it->second.versions) out.push_back(v);
  return out;
}

std::vector<ModelManager::IndexEntry> ModelManager::Index(bool ready_only) const {
  std::vector<std::string> on_disk;
  if (auto listed = repository_.ListModels(); listed.ok()) on_disk = *listed;
  absl::MutexLock l(&mu_);
  std::map<std::string, const Entry*> all;
  for (const std::string& n : on_disk) all[n] = nullptr;
  for (const auto& [n, e] : models_) all[n] = &e;
  std::vector<IndexEntry> out;
  for (const auto& [n, e] : all) {
    if (e && !e->versions.empty()) {
      for (const auto& [v, m] : e->versions) out.push_back({n, absl::StrCat(v), "READY", ""});
      continue;
    }
    if (ready_only) continue;
    if (e) out.push_back({n, "", e->state, e->reason});
    else out.push_back({n, "", "UNAVAILABLE", "not loaded"});
  }
  return out;
}

}  // namespace kiln
