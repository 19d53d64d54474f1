// `kiln perf --shared-memory system` (like perf_analyzer's
// --shared-memory=system): every concurrent worker gets a POSIX
// shared-memory object of its own (key /kiln_perf_<pid>_<run>_<n>, so
// workers never share bytes), holding the request's inputs and room for
// every output; perf registers it as a region over the chosen protocol
// (gRPC SystemSharedMemoryRegister or REST POST
// v2/systemsharedmemory/region/NAME/register) and the worker's requests
// name the region for every input and every output, so no tensor travels
// in the request or the response.
//
// Output sizes come from --output-shared-memory-size when given, else from
// the model's metadata when every dim is known (a batching model's leading
// -1 is the request's rows), else from one probe inference sent inline
// before the run.
//
// Cleanup: a worker unregisters its region and unlinks its object when it
// is destroyed (at the end of each level, on every error path); on SIGINT /
// SIGTERM PerfSignalCleanup runs ShmPerfTransport::CleanupNow and exits.
// Only SIGKILL (or a crash) leaves objects in /dev/shm.
//
// The server must allow the keys: kilnd --shm-allow=/kiln_perf (or a
// shorter prefix such as /kiln_); a server without it fails the first
// registration, before anything is measured, with a message naming the
// flag.
//
// Thread safety: the free functions are pure. ShmPerfTransport is
// thread-safe like every PerfTransport (its bookkeeping is under a mutex);
// its workers are used by one thread at a time. PerfSignalCleanup's
// SetCleanup may be called from any thread.
#ifndef KILN_CLIENTS_PERF_SHM_H_
#define KILN_CLIENTS_PERF_SHM_H_

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "clients/perf.h"
#include "clients/perf_transport.h"

namespace kiln {

class PerfSignalCleanup;

enum class SharedMemoryMode { kNone, kSystem };

// "none" / "system" (INVALID_ARGUMENT naming the choices otherwise).
absl::StatusOr<SharedMemoryMode> ParseSharedMemoryMode(const std::string& text);
const char* SharedMemoryModeName(SharedMemoryMode mode);

// Largest --output-shared-memory-size and largest worker region.
inline constexpr uint64_t kMaxPerfShmBytes = uint64_t{16} << 30;

// Where one tensor sits in a worker's region (slots are 64-byte aligned).
struct PerfShmSlot {
  std::string name;
  uint64_t offset = 0, byte_size = 0;
};
struct PerfShmLayout {
  std::vector<PerfShmSlot> inputs, outputs;
  uint64_t total_bytes = 0;
};

// (output name, byte size) in the model's output order.
using PerfOutputSizes = std::vector<std::pair<std::string, uint64_t>>;

// Inputs first (sizes of request's raw_input_contents, one per input, as
// MakePerfRequest builds it), then `outputs`. INVALID_ARGUMENT when the
// request lacks raw data, a size is 0 or the total passes kMaxPerfShmBytes.
absl::StatusOr<PerfShmLayout> MakePerfShmLayout(const inference::ModelInferRequest& request,
                                                const PerfOutputSizes& outputs);

// Sizes of every output of the model for `request` (see the file comment);
// `override_bytes` > 0 is used for each. Calls the transport's metadata,
// config and, when a size is not known, InferOnce(request).
absl::StatusOr<PerfOutputSizes> FindPerfOutputSizes(PerfTransport* transport,
                                                    const PerfOptions& options,
                                                    const inference::ModelInferRequest& request,
                                                    uint64_t override_bytes);

// `request` with every input of `layout` read from, and every output
// written to, `region` at the layout's offsets (no raw data left).
absl::StatusOr<inference::ModelInferRequest> MakePerfShmRequest(
    const inference::ModelInferRequest& request, const PerfShmLayout& layout,
    const std::string& region);

// A PerfTransport over `base` whose workers each own a region (above).
// Metadata, config, statistics and InferOnce go to `base` unchanged.
class ShmPerfTransport : public PerfTransport {
 public:
  // `base` must outlive this. Keys are key_prefix + "<pid>_<run>_<n>".
  ShmPerfTransport(PerfTransport* base, PerfShmLayout layout,
                   std::string key_prefix = "/kiln_perf_");
  ~ShmPerfTransport() override;

  Protocol protocol() const override { return base_->protocol(); }
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(
      const std::string& model, const std::string& version) override;
  absl::StatusOr<inference::ModelConfigResponse> ModelConfig(const std::string& model,
                                                             const std::string& version) override;
  absl::StatusOr<inference::ModelStatisticsResponse> Statistics(
      const std::string& model, const std::string& version) override;
  absl::StatusOr<inference::ModelInferResponse> InferOnce(
      const inference::ModelInferRequest& request) override;
  // Creates the worker's object, copies request's inputs into it,
  // registers it, and makes a `base` worker for the shared-memory request.
  absl::StatusOr<std::unique_ptr<PerfWorker>> NewWorker(
      const inference::ModelInferRequest& request) override;

  // Unlinks every live object and unregisters its region; returns how many
  // there were. For the signal thread: the process ends afterwards (the
  // workers must not be used again).
  int CleanupNow();
  // Regions registered and not yet released.
  int live_regions() const;
  const PerfShmLayout& layout() const { return layout_; }

 private:
  friend class ShmPerfWorker;
  // The worker of `name` is gone: unregister (a failure is printed).
  void Release(const std::string& name);
  // `name` was never registered: drop it from the list only.
  void Forget(const std::string& name);

  PerfTransport* const base_;
  const PerfShmLayout layout_;
  const std::string key_prefix_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> live_ ABSL_GUARDED_BY(mu_);  // region -> key
  int next_ ABSL_GUARDED_BY(mu_) = 0;
};

// Sets up ShmPerfTransport over `base` (output sizes, layout), hooks its
// cleanup to `signals` (may be null) for the run, and runs RunPerf on it.
// Every region is unregistered and unlinked when it returns.
absl::StatusOr<std::vector<PerfLevel>> RunPerfWithSharedMemory(
    PerfTransport* base, const inference::ModelInferRequest& request, const PerfOptions& options,
    uint64_t output_bytes, PerfSignalCleanup* signals,
    const std::function<void(const PerfLevel&)>& on_level);

// Blocks SIGINT and SIGTERM in the calling thread, so in every thread it
// starts afterwards (create it before any other thread exists), and waits
// for them in a thread of its own: on one it runs the cleanup, then ends
// the process with 128 + the signal's number. Destruction stops the
// waiting and restores the signal mask.
class PerfSignalCleanup {
 public:
  PerfSignalCleanup();
  ~PerfSignalCleanup();
  PerfSignalCleanup(const PerfSignalCleanup&) = delete;
  PerfSignalCleanup& operator=(const PerfSignalCleanup&) = delete;
  // Replaces the cleanup (nullptr: none); waits for a running one.
  void SetCleanup(std::function<void()> cleanup);

 private:
  void Wait();
  sigset_t set_, old_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::function<void()> cleanup_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace kiln

#endif  // KILN_CLIENTS_PERF_SHM_H_
