// The device layer: buffers, allocators, compilers and programs.
//
// The runtime takes source strings and binaries and knows nothing of the IR.
// A Device bundles an Allocator (with LRU reuse of freed buffers), a Compiler
// (source -> binary, with an on-disk cache where it makes sense) and a
// program loader. Devices live in a DeviceRegistry that the caller owns
// (no global singletons).
#ifndef KILN_ENGINE_RUNTIME_DEVICE_H_
#define KILN_ENGINE_RUNTIME_DEVICE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kiln {

class Device;

// Allocates device memory and keeps freed blocks for reuse, keyed by exact
// byte size, evicting least recently freed blocks when the cache exceeds its
// limit or when an allocation fails. Thread-safe. Subclasses must call
// ClearCache() in their destructor (RawFree is virtual, so the base
// destructor cannot release cached blocks).
//
// An optional memory limit bounds the bytes in use plus the bytes cached:
// an Alloc that would take the bytes in use past it fails with
// RESOURCE_EXHAUSTED, and one that fits evicts cached blocks to make room.
class Allocator {
 public:
  struct Stats {
    size_t allocated_bytes = 0;  // in use by live buffers
    size_t cached_bytes = 0;     // freed, kept for reuse
    uint64_t allocations = 0;    // Alloc calls
    uint64_t cache_hits = 0;     // Alloc calls served from the cache
    uint64_t refusals = 0;       // Alloc / CheckRoom calls refused by the memory limit
  };

  explicit Allocator(size_t cache_limit_bytes = size_t{1} << 30)
      : cache_limit_(cache_limit_bytes) {}
  virtual ~Allocator();

  // Returns device memory of at least `nbytes` (nbytes may be 0);
  // RESOURCE_EXHAUSTED beyond the memory limit.
  absl::StatusOr<void*> Alloc(size_t nbytes);
  // Returns memory obtained from Alloc(nbytes) to the cache.
  void Free(void* ptr, size_t nbytes);
  // Releases every cached block.
  void ClearCache();
  Stats stats() const;

  // Bytes in use plus cached that Alloc keeps within; 0 = no limit (the
  // default). Lowering it below what is in use refuses new allocations
  // until enough is freed.
  void set_memory_limit(size_t bytes);
  size_t memory_limit() const;
  // OK when `nbytes` more bytes in use stay within the memory limit (cached
  // blocks do not count: Alloc evicts them to make room); otherwise
  // RESOURCE_EXHAUSTED naming `what`, the bytes, those in use and the limit.
  // Allocates nothing.
  absl::Status CheckRoom(size_t nbytes, const std::string& what);

  // Host <-> device copies of `nbytes`.
  virtual absl::Status CopyIn(void* dst, const void* src, size_t nbytes) = 0;
  // True when Alloc's blocks are host memory a caller may write directly
  // (the CPU device): host-side producers then skip a staging copy.
  virtual bool host_addressable() const { return false; }
  virtual absl::Status CopyOut(void* dst, const void* src, size_t nbytes) = 0;

 protected:
  // Called without the allocator's lock held (RawAlloc) or with it
  // (RawFree from eviction): implementations must be thread-safe and must
  // not call back into this Allocator.
  virtual absl::StatusOr<void*> RawAlloc(size_t nbytes) = 0;
  virtual void RawFree(void* ptr, size_t nbytes) = 0;

 private:
  void EvictLocked(size_t target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckRoomLocked(size_t nbytes, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t cache_limit_;
  mutable absl::Mutex mu_;
  // size -> blocks; plus LRU order of (sequence -> (size, ptr)).
  std::multimap<size_t, std::pair<uint64_t, void*>> cache_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::pair<size_t, void*>> lru_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  size_t memory_limit_ ABSL_GUARDED_BY(mu_) = 0;
};

// A block of device memory of fixed size, allocated on first use and returned
// to its allocator when destroyed. Owned through shared_ptr. Thread-compatible.
class Buffer {
 public:
  Buffer(Device* device, size_t nbytes) : device_(device), nbytes_(nbytes) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Device* device() const { return device_; }
  size_t nbytes() const { return nbytes_; }
  bool allocated() const { return ptr_ != nullptr; }
  // Allocates if needed and returns the device pointer.
  absl::StatusOr<void*> Ptr();
  absl::Status CopyIn(const void* host, size_t nbytes);
  absl::Status CopyOut(void* host, size_t nbytes);
  // Process-unique id (for printing and identity).
  uint64_t id() const { return id_; }

 private:
  Device* const device_;
  const size_t nbytes_;
  void* ptr_ = nullptr;
  const uint64_t id_ = NextId();
  static uint64_t NextId();
};
using BufferRef = std::shared_ptr<Buffer>;

// Launch geometry: global and local sizes (GPU style). CPU programs run
// their parallel loop (one of their global loops, Kernel::ParallelAxis), of
// size global[0], split across worker threads.
struct LaunchDims {
  std::array<int64_t, 3> global = {1, 1, 1};
  std::array<int64_t, 3> local = {1, 1, 1};
  // Hint that the kernel is tiny: CPU devices run it inline on the calling
  // thread instead of splitting it across workers.
  bool single_thread = false;
};

// A compiled kernel, ready to launch. Thread-safe for concurrent launches.
class Program {
 public:
  virtual ~Program() = default;
  // Runs the kernel on `bufs` (device pointers, in parameter order) with the
  // symbolic variable values `vars`. Returns when the kernel has finished when
  // `wait` is true (the time in seconds goes to *seconds if not null).
  virtual absl::Status Launch(const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                              const LaunchDims& dims, bool wait, double* seconds) = 0;
  // Like Launch (waiting), but with the byte size of every buffer so that
  // devices able to do so (the interpreter) bounds-check each memory access
  // and return OutOfRangeError instead of touching memory outside a buffer.
  // The default ignores `nbytes` and calls Launch(bufs, vars, dims, true, nullptr).
  virtual absl::Status LaunchChecked(const std::vector<void*>& bufs,
                                     const std::vector<size_t>& nbytes,
                                     const std::vector<int64_t>& vars, const LaunchDims& dims);
  const std::string& name() const { return name_; }

 protected:
  explicit Program(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// Source -> binary. Implementations cache what is expensive to redo.
class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual absl::StatusOr<std::string> Compile(const std::string& source) = 0;
  // Compiles `sources` together when the backend can (one clang run for many
  // kernels); the default compiles one by one. Returns one binary per source.
  virtual absl::StatusOr<std::vector<std::string>> CompileMany(
      const std::vector<std::string>& sources);
  struct Stats {
    uint64_t compiled = 0;      // sources actually compiled
    uint64_t disk_hits = 0;     // served from the on-disk cache
    double compile_seconds = 0;
  };
  virtual Stats stats() const { return {}; }
};

// One kernel launch of a recorded sequence (see GraphExecutor).
struct GraphLaunch {
  Program* program = nullptr;  // owned elsewhere; must outlive the graph
  std::vector<void*> bufs;
  std::vector<int64_t> vars;
  LaunchDims dims;
};

// A recorded sequence of kernel launches that the device replays as one unit
// (a CUDA graph): one submission instead of one per kernel. Launch i may get
// new arguments (buffers swapped between replays) before a replay; only the
// launches that changed are patched. Made by Device::NewGraph. Not
// thread-safe (one user, e.g. one JIT capture, at a time).
class GraphExecutor {
 public:
  virtual ~GraphExecutor() = default;
  // Replaces the arguments of launch `i` (same program and dims).
  virtual absl::Status Update(size_t i, const std::vector<void*>& bufs,
                              const std::vector<int64_t>& vars) = 0;
  // Runs every launch in order; waits when `wait` (time into *seconds).
  virtual absl::Status Run(bool wait, double* seconds) = 0;
  virtual size_t size() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  const std::string& name() const { return name_; }
  // Which source language this device runs: "c", "bytecode", "opencl", "cuda".
  virtual std::string renderer() const = 0;
  virtual Allocator& allocator() = 0;
  virtual Compiler& compiler() = 0;
  // Loads a binary produced by compiler(); `function` names the kernel inside.
  virtual absl::StatusOr<std::unique_ptr<Program>> LoadProgram(const std::string& function,
                                                               const std::string& binary) = 0;
  // Waits for all queued work.
  virtual absl::Status Synchronize() { return absl::OkStatus(); }
  // Number of parallel workers (CPU threads) a launch from the calling thread
  // runs on; 1 for others.
  virtual int workers() const { return 1; }
  // Runs fn(0), ..., fn(workers() - 1) side by side, one on each of those
  // workers, and returns when all have; a kernel launched inside runs on its
  // calling worker alone (kernels of independent chains, one chain a core).
  // When the workers are busy the calls run one after the other on the
  // calling thread. Others: fn(0).
  virtual void RunOnWorkers(const std::function<void(int worker)>& fn) { fn(0); }
  // CUDA: the card's compute capability (90 for sm_90); 0 for others.
  virtual int compute_capability() const { return 0; }
  // Devices that can replay a launch sequence as one unit return a
  // GraphExecutor for `launches` (in order); others UnimplementedError.
  virtual absl::StatusOr<std::unique_ptr<GraphExecutor>> NewGraph(
      const std::vector<GraphLaunch>& launches) {
    (void)launches;
    return absl::UnimplementedError(name_ + " does not replay launch graphs");
  }

  absl::StatusOr<BufferRef> NewBuffer(size_t nbytes) {
    return std::make_shared<Buffer>(this, nbytes);
  }

 protected:
  explicit Device(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// Owns the devices of one engine instance. Devices are created on first Get.
// Thread-safe.
class DeviceRegistry {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Device>>()>;

  // A registry with the built-in devices: "CPU", "INTERP" (and GPU devices
  // when compiled in; they fail at Get time when no driver is present).
  static std::unique_ptr<DeviceRegistry> WithDefaults();

  // Adds (or replaces) a device factory. Factories run under the registry's
  // lock and must not call back into the registry.
  void Register(const std::string& name, Factory factory);
  // Case-insensitive; creates the device on first use.
  absl::StatusOr<Device*> Get(const std::string& name);
  std::vector<std::string> Names() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, Factory> factories_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Device>> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_DEVICE_H_
