// A fake model backend for tests: FP32 inputs IN0, IN1 of shape [-1, width]
// (or [width] without a batch dim); outputs OUT0 = IN0 + IN1 and
// OUT1 = IN0 * 2. Runners mimic the engine JIT per input signature (first
// call plain, second capture, later replays; LRU of max_captures), can be
// slowed down or made to fail, and record every batch they run.
//
// Thread safety: the backend and the shared Log are thread-safe; a runner
// is used by one thread at a time.
#ifndef KILN_SERVER_TESTING_FAKE_BACKEND_H_
#define KILN_SERVER_TESTING_FAKE_BACKEND_H_

#include <atomic>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/clock.h"
#include "server/runner.h"

namespace kiln::testing {

struct FakeLog {
  absl::Mutex mu;
  std::vector<int64_t> batch_rows ABSL_GUARDED_BY(mu);  // rows of every run
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  // Runners report no captures (as a JIT that dropped or never kept them).
  std::atomic<bool> no_captures{false};
  std::vector<int> runner_threads ABSL_GUARDED_BY(mu);  // RunnerOptions::threads, per NewRunner
};

struct FakeOptions {
  int64_t width = 4;
  bool batched = true;              // inputs [-1, width] (else [width])
  absl::Duration delay = absl::ZeroDuration();  // per run
  // Runs advance this clock by `delay` instead of sleeping: costs the
  // executor measures are then exact, whatever else loads the machine.
  FakeClock* clock = nullptr;
  bool fail = false;                // every run fails (INTERNAL)
  bool fail_load = false;           // Load fails
};

class FakeRunner : public ModelRunner {
 public:
  FakeRunner(FakeOptions o, size_t max_captures, std::shared_ptr<FakeLog> log)
      : o_(o), max_(max_captures), log_(std::move(log)) {}

  absl::StatusOr<std::vector<OutputTensor>> Run(const std::vector<InputTensor>& in,
                                                RunStats* stats) override {
    int now = ++log_->running;
    int prev = log_->max_running.load();
    while (now > prev && !log_->max_running.compare_exchange_weak(prev, now)) {}
    if (o_.clock) o_.clock->Advance(o_.delay);
    else if (o_.delay > absl::ZeroDuration()) absl::SleepFor(o_.delay);
    --log_->running;
    {
      absl::MutexLock l(&log_->mu);
      log_->batch_rows.push_back(o_.batched ? in[0].shape[0] : 1);
    }
    if (o_.fail) return absl::InternalError("fake backend failure");
    if (in.size() != 2) return absl::InvalidArgumentError("fake: needs 2 inputs");
    std::vector<std::vector<int64_t>> shapes;
    for (const InputTensor& t : in) shapes.push_back(t.shape);
    const std::string sig = Sig(shapes);
    lru_.remove(sig);
    lru_.push_front(sig);
    int calls = ++calls_[sig];
    while (lru_.size() > max_) {
      calls_.erase(lru_.back());
      lru_.pop_back();
    }
    stats->path = calls == 1 ? RunStats::Path::kPlain
                              : calls == 2 ? RunStats::Path::kCapture : RunStats::Path::kReplay;
    size_t n = in[0].data.size() / 4;
    const float* a = reinterpret_cast<const float*>(in[0].data.data());
    const float* b = reinterpret_cast<const float*>(in[1].data.data());
    OutputTensor sum{"OUT0", dtypes::kFloat32, in[0].shape, std::string(n * 4, '\0')};
    OutputTensor twice{"OUT1", dtypes::kFloat32, in[0].shape, std::string(n * 4, '\0')};
    float* s = reinterpret_cast<float*>(sum.data.data());
    float* t = reinterpret_cast<float*>(twice.data.data());
    for (size_t i = 0; i < n; ++i) {
      s[i] = a[i] + b[i];
      t[i] = a[i] * 2;
    }
    stats->flops = 2.0 * static_cast<double>(n);
    stats->bytes = 16.0 * static_cast<double>(n);
    stats->kernels = 2;
    stats->infer_ns = 1000;
    return std::vector<OutputTensor>{std::move(sum), std::move(twice)};
  }

  bool HasCapture(const std::vector<DType>& /*dtypes*/,
                  const std::vector<std::vector<int64_t>>& shapes) const override {
    if (log_->no_captures) return false;
    auto it = calls_.find(Sig(shapes));
    return it != calls_.end() && it->second >= 2;
  }

 private:
  static std::string Sig(const std::vector<std::vector<int64_t>>& shapes) {
    std::string sig;
    for (const auto& shape : shapes)
      for (int64_t d : shape) sig += std::to_string(d) + ",";
    return sig;
  }

  FakeOptions o_;
  size_t max_;
  std::shared_ptr<FakeLog> log_;
  std::list<std::string> lru_;
  std::map<std::string, int> calls_;
};

class FakeBackend : public ModelBackend {
 public:
  FakeBackend(FakeOptions o, std::shared_ptr<FakeLog> log) : o_(o), log_(std::move(log)) {
    std::vector<int64_t> dims = o.batched ? std::vector<int64_t>{-1, o.width}
                                          : std::vector<int64_t>{o.width};
    sig_.inputs = {{"IN0", dtypes::kFloat32, dims}, {"IN1", dtypes::kFloat32, dims}};
    sig_.outputs = {{"OUT0", dtypes::kFloat32, dims}, {"OUT1", dtypes::kFloat32, dims}};
  }
  const ModelSignature& signature() const override { return sig_; }
  absl::StatusOr<std::unique_ptr<ModelRunner>> NewRunner(const RunnerOptions& options) override {
    {
      absl::MutexLock lock(&log_->mu);
      log_->runner_threads.push_back(options.threads);
    }
    return std::unique_ptr<ModelRunner>(new FakeRunner(o_, options.jit.max_captures, log_));
  }

 private:
  FakeOptions o_;
  std::shared_ptr<FakeLog> log_;
  ModelSignature sig_;
};

// Loads every path as a FakeBackend; options per model directory name
// (the path component before the version), default otherwise.
class FakeLoader : public BackendLoader {
 public:
  explicit FakeLoader(std::shared_ptr<FakeLog> log = std::make_shared<FakeLog>())
      : log_(std::move(log)) {}
  void Set(const std::string& model, FakeOptions o) {
    absl::MutexLock l(&mu_);
    options_[model] = o;
  }
  absl::StatusOr<std::unique_ptr<ModelBackend>> Load(const std::string& path,
                                                     const std::string&) override {
    FakeOptions o;
    {
      absl::MutexLock l(&mu_);
      for (const auto& [m, opt] : options_)
        if (path.find("/" + m + "/") != std::string::npos) o = opt;
      ++loads_;
    }
    if (o.fail_load) return absl::InvalidArgumentError("fake: cannot load " + path);
    return std::unique_ptr<ModelBackend>(new FakeBackend(o, log_));
  }
  int loads() {
    absl::MutexLock l(&mu_);
    return loads_;
  }
  const std::shared_ptr<FakeLog>& log() const { return log_; }

 private:
  std::shared_ptr<FakeLog> log_;
  absl::Mutex mu_;
  std::map<std::string, FakeOptions> options_ ABSL_GUARDED_BY(mu_);
  int loads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kiln::testing

#endif  // KILN_SERVER_TESTING_FAKE_BACKEND_H_
