#include "clients/perf_shm.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "clients/client.h"

namespace kiln {
namespace {

constexpr uint64_t kAlign = 64;

absl::Status Wrap(const absl::Status& s, absl::string_view what) {
  return absl::Status(s.code(), absl::StrCat("--shared-memory system: ", what, ": ", s.message()));
}

// Adds a slot of `bytes` at the next aligned offset of `layout`.
absl::Status AddSlot(const std::string& name, uint64_t bytes, PerfShmLayout* layout,
                     std::vector<PerfShmSlot>* slots) {
  if (bytes == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "--shared-memory system: tensor '", name, "' has 0 bytes; it cannot be a region slice"));
  const uint64_t offset = (layout->total_bytes + kAlign - 1) / kAlign * kAlign;
  if (bytes > kMaxPerfShmBytes || offset > kMaxPerfShmBytes - bytes)
    return absl::InvalidArgumentError(
        absl::StrCat("--shared-memory system: the tensors of one request need more than ",
                     kMaxPerfShmBytes, " bytes"));
  slots->push_back({name, offset, bytes});
  layout->total_bytes = offset + bytes;
  return absl::OkStatus();
}

// Bytes of `dims` x `datatype`, or 0 when a dim is unknown (< 0), the
// datatype has no fixed size, or it passes kMaxPerfShmBytes.
uint64_t KnownBytes(const std::vector<int64_t>& dims, const std::string& datatype) {
  uint64_t n = static_cast<uint64_t>(DatatypeSize(datatype));
  for (int64_t d : dims) {
    if (d < 0) return 0;
    if (d != 0 && n > kMaxPerfShmBytes / static_cast<uint64_t>(d)) return 0;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

// Output sizes from one inline inference of `request`.
absl::StatusOr<PerfOutputSizes> ProbeOutputSizes(PerfTransport* transport,
                                                 const inference::ModelMetadataResponse& meta,
                                                 const inference::ModelInferRequest& request) {
  auto resp = transport->InferOnce(request);
  if (!resp.ok())
    return Wrap(resp.status(), "the probe inference (for the output sizes; or give "
                               "--output-shared-memory-size) failed");
  const bool raw = resp->raw_output_contents_size() == resp->outputs_size();
  PerfOutputSizes out;
  for (const auto& m : meta.outputs()) {
    uint64_t bytes = 0;
    bool found = false;
    for (int i = 0; i < resp->outputs_size() && !found; ++i) {
      const auto& o = resp->outputs(i);
      if (o.name() != m.name()) continue;
      found = true;
      bytes = raw ? resp->raw_output_contents(i).size()
                  : KnownBytes({o.shape().begin(), o.shape().end()}, o.datatype());
    }
    if (!found)
      return absl::FailedPreconditionError(
          absl::StrCat("--shared-memory system: the probe inference returned no output '",
                       m.name(), "'; give --output-shared-memory-size"));
    out.emplace_back(m.name(), bytes);
  }
  return out;
}

}  // namespace

absl::StatusOr<SharedMemoryMode> ParseSharedMemoryMode(const std::string& text) {
  if (text == "none") return SharedMemoryMode::kNone;
  if (text == "system") return SharedMemoryMode::kSystem;
  return absl::InvalidArgumentError("--shared-memory: '" + text + "' (use none or system)");
}

const char* SharedMemoryModeName(SharedMemoryMode mode) {
  return mode == SharedMemoryMode::kSystem ? "system" : "none";
}

absl::StatusOr<PerfShmLayout> MakePerfShmLayout(const inference::ModelInferRequest& request,
                                                const PerfOutputSizes& outputs) {
  if (request.raw_input_contents_size() != request.inputs_size())
    return absl::InvalidArgumentError(
        "--shared-memory system: the request must carry every input as raw bytes");
  PerfShmLayout layout;
  for (int i = 0; i < request.inputs_size(); ++i) {
    absl::Status s = AddSlot(request.inputs(i).name(), request.raw_input_contents(i).size(),
                             &layout, &layout.inputs);
    if (!s.ok()) return s;
  }
  for (const auto& [name, bytes] : outputs)
    if (absl::Status s = AddSlot(name, bytes, &layout, &layout.outputs); !s.ok()) return s;
  if (layout.total_bytes == 0)
    return absl::InvalidArgumentError("--shared-memory system: the model has no tensors");
  return layout;
}

absl::StatusOr<PerfOutputSizes> FindPerfOutputSizes(PerfTransport* transport,
                                                    const PerfOptions& o,
                                                    const inference::ModelInferRequest& request,
                                                    uint64_t override_bytes) {
  auto meta = transport->ModelMetadata(o.model, o.version);
  if (!meta.ok()) return meta.status();
  if (meta->outputs_size() == 0)
    return absl::FailedPreconditionError("--shared-memory system: the model has no outputs");
  PerfOutputSizes out;
  if (override_bytes > 0) {
    for (const auto& m : meta->outputs()) out.emplace_back(m.name(), override_bytes);
    return out;
  }
  auto config = transport->ModelConfig(o.model, o.version);
  if (!config.ok()) return config.status();
  const bool batched = config->config().max_batch_size() > 0;
  const int64_t rows = request.inputs_size() > 0 && request.inputs(0).shape_size() > 0
                           ? request.inputs(0).shape(0)
                           : o.batch;
  for (const auto& m : meta->outputs()) {
    std::vector<int64_t> dims(m.shape().begin(), m.shape().end());
    if (batched && !dims.empty() && dims[0] == -1) dims[0] = rows;
    const uint64_t bytes = KnownBytes(dims, m.datatype());
    if (bytes == 0) return ProbeOutputSizes(transport, *meta, request);
    out.emplace_back(m.name(), bytes);
  }
  return out;
}

absl::StatusOr<inference::ModelInferRequest> MakePerfShmRequest(
    const inference::ModelInferRequest& request, const PerfShmLayout& layout,
    const std::string& region) {
  inference::ModelInferRequest r = request;
  for (const PerfShmSlot& in : layout.inputs) {
    absl::Status s = SetInputSharedMemory(&r, in.name, region, in.byte_size, in.offset);
    if (!s.ok()) return s;
  }
  for (const PerfShmSlot& out : layout.outputs)
    SetOutputSharedMemory(&r, out.name, region, out.byte_size, out.offset);
  return r;
}

// ---- workers and their regions ----

class ShmPerfWorker : public PerfWorker {
 public:
  ShmPerfWorker(ShmPerfTransport* owner, std::string name, std::unique_ptr<ClientShm> shm,
                std::unique_ptr<PerfWorker> inner)
      : owner_(owner), name_(std::move(name)), shm_(std::move(shm)), inner_(std::move(inner)) {}
  ~ShmPerfWorker() override {
    inner_.reset();          // no request of ours is in flight any more
    owner_->Release(name_);  // unregister
    shm_.reset();            // unmap + unlink
  }
  absl::Status Infer() override { return inner_->Infer(); }

 private:
  ShmPerfTransport* const owner_;
  const std::string name_;
  std::unique_ptr<ClientShm> shm_;
  std::unique_ptr<PerfWorker> inner_;
};

ShmPerfTransport::ShmPerfTransport(PerfTransport* base, PerfShmLayout layout,
                                   std::string key_prefix)
    : base_(base),
      layout_(std::move(layout)),
      // <pid>_<run>: the pid alone may repeat across PID namespaces.
      key_prefix_(absl::StrFormat("%s%d_%x_", key_prefix, static_cast<int>(getpid()),
                                  static_cast<uint32_t>(absl::ToUnixMicros(absl::Now())))) {}

ShmPerfTransport::~ShmPerfTransport() = default;

absl::StatusOr<inference::ModelMetadataResponse> ShmPerfTransport::ModelMetadata(
    const std::string& model, const std::string& version) {
  return base_->ModelMetadata(model, version);
}

absl::StatusOr<inference::ModelConfigResponse> ShmPerfTransport::ModelConfig(
    const std::string& model, const std::string& version) {
  return base_->ModelConfig(model, version);
}

absl::StatusOr<inference::ModelStatisticsResponse> ShmPerfTransport::Statistics(
    const std::string& model, const std::string& version) {
  return base_->Statistics(model, version);
}

absl::StatusOr<inference::ModelInferResponse> ShmPerfTransport::InferOnce(
    const inference::ModelInferRequest& request) {
  return base_->InferOnce(request);
}

absl::StatusOr<std::unique_ptr<PerfWorker>> ShmPerfTransport::NewWorker(
    const inference::ModelInferRequest& request) {
  if (request.raw_input_contents_size() != static_cast<int>(layout_.inputs.size()))
    return absl::InvalidArgumentError("--shared-memory system: the request does not fit the layout");
  std::string key;
  {
    absl::MutexLock l(&mu_);
    key = absl::StrCat(key_prefix_, next_++);
    // Listed before it exists, so a signal in between still unlinks it.
    live_[key.substr(1)] = key;
  }
  const std::string name = key.substr(1);
  auto shm = ClientShm::Create(key, layout_.total_bytes);
  if (!shm.ok()) {
    Forget(name);
    return Wrap(shm.status(), "cannot create the worker's shared-memory object");
  }
  for (size_t i = 0; i < layout_.inputs.size(); ++i) {
    const std::string& raw = request.raw_input_contents(static_cast<int>(i));
    if (raw.size() != layout_.inputs[i].byte_size) {
      Forget(name);
      return absl::InvalidArgumentError(absl::StrCat(
          "--shared-memory system: input '", layout_.inputs[i].name, "' changed size"));
    }
    std::memcpy((*shm)->data() + layout_.inputs[i].offset, raw.data(), raw.size());
  }
  absl::Status s = base_->RegisterSystemSharedMemory(name, key, layout_.total_bytes, 0);
  if (!s.ok()) {
    Forget(name);
    std::string hint = s.message().find("--shm-allow") == absl::string_view::npos
                           ? absl::StrCat(" (kilnd serves shared memory only with --shm-allow "
                                          "set to a prefix of ", key_prefix_,
                                          ", e.g. --shm-allow=/kiln_perf)")
                           : "";
    return absl::Status(s.code(), absl::StrCat("--shared-memory system: registering region '",
                                               name, "' (", layout_.total_bytes,
                                               " bytes) failed: ", s.message(), hint));
  }
  auto req = MakePerfShmRequest(request, layout_, name);
  absl::StatusOr<std::unique_ptr<PerfWorker>> inner =
      req.ok() ? base_->NewWorker(*req) : req.status();
  if (!inner.ok()) {
    Release(name);
    return inner.status();
  }
  return std::unique_ptr<PerfWorker>(
      new ShmPerfWorker(this, name, std::move(*shm), std::move(*inner)));
}

void ShmPerfTransport::Forget(const std::string& name) {
  absl::MutexLock l(&mu_);
  live_.erase(name);
}

void ShmPerfTransport::Release(const std::string& name) {
  {
    absl::MutexLock l(&mu_);
    if (live_.erase(name) == 0) return;  // cleaned up already
  }
  absl::Status s = base_->UnregisterSystemSharedMemory(name);
  if (!s.ok() && s.code() != absl::StatusCode::kNotFound)
    std::fprintf(stderr, "kiln: warning: unregistering shared-memory region '%s': %s\n",
                 name.c_str(), s.ToString().c_str());
}

int ShmPerfTransport::CleanupNow() {
  absl::MutexLock l(&mu_);
  // Unlink first: that is local and instant, unregistering needs the server.
  for (const auto& [name, key] : live_) shm_unlink(key.c_str());
  for (const auto& [name, key] : live_) base_->UnregisterSystemSharedMemory(name).IgnoreError();
  const int n = static_cast<int>(live_.size());
  live_.clear();
  return n;
}

int ShmPerfTransport::live_regions() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(live_.size());
}

absl::StatusOr<std::vector<PerfLevel>> RunPerfWithSharedMemory(
    PerfTransport* base, const inference::ModelInferRequest& request, const PerfOptions& options,
    uint64_t output_bytes, PerfSignalCleanup* signals,
    const std::function<void(const PerfLevel&)>& on_level) {
  auto sizes = FindPerfOutputSizes(base, options, request, output_bytes);
  if (!sizes.ok()) return sizes.status();
  auto layout = MakePerfShmLayout(request, *sizes);
  if (!layout.ok()) return layout.status();
  std::printf("shared memory: system, one %llu-byte region per worker (%zu inputs, %zu outputs)\n",
              static_cast<unsigned long long>(layout->total_bytes), layout->inputs.size(),
              layout->outputs.size());
  std::fflush(stdout);
  ShmPerfTransport shm(base, *std::move(layout));
  if (signals != nullptr)
    signals->SetCleanup([&shm] {
      int n = shm.CleanupNow();
      std::fprintf(stderr, "kiln: removed %d shared-memory region(s)\n", n);
    });
  auto levels = RunPerf(&shm, request, options, on_level);
  if (signals != nullptr) signals->SetCleanup(nullptr);
  return levels;
}

// ---- signals ----

PerfSignalCleanup::PerfSignalCleanup() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
  thread_ = std::thread([this] { Wait(); });
}

PerfSignalCleanup::~PerfSignalCleanup() {
  stop_ = true;
  thread_.join();
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

void PerfSignalCleanup::SetCleanup(std::function<void()> cleanup) {
  absl::MutexLock l(&mu_);
  cleanup_ = std::move(cleanup);
}

void PerfSignalCleanup::Wait() {
  while (!stop_.load()) {
    timespec wait = {0, 100 * 1000 * 1000};
    const int sig = sigtimedwait(&set_, nullptr, &wait);
    if (sig <= 0) continue;  // timeout (EAGAIN) or EINTR
    std::fflush(stdout);
    std::fprintf(stderr, "kiln: interrupted (%s)\n", strsignal(sig));
    {
      absl::MutexLock l(&mu_);
      if (cleanup_) cleanup_();
    }
    std::fflush(stderr);
    _exit(128 + sig);
  }
}

}  // namespace kiln
