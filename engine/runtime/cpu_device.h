// The "CPU" device: C kernels compiled by clang into shared objects, loaded
// with dlopen and run on a persistent thread pool.
//
// Kernel ABI (what the C renderer emits):
//   void NAME(void** bufs, const long long* vars, long long start, long long end);
// The kernel runs the iterations [start, end) of its outermost (parallel)
// loop; a launch of global size G splits [0, G) across the pool's threads.
#ifndef KILN_ENGINE_RUNTIME_CPU_DEVICE_H_
#define KILN_ENGINE_RUNTIME_CPU_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/runtime/device.h"
#include "engine/runtime/thread_pool.h"

namespace kiln {

// Host memory: 64-byte aligned blocks (sizes rounded up to 64 bytes; a
// zero-byte request still gets a unique valid pointer), memcpy copies.
// Thread-safe.
class HostAllocator : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  explicit HostAllocator(size_t cache_limit_bytes = size_t{1} << 30)
      : Allocator(cache_limit_bytes) {}
  ~HostAllocator() override;

  absl::Status CopyIn(void* dst, const void* src, size_t nbytes) override;
  absl::Status CopyOut(void* dst, const void* src, size_t nbytes) override;

 protected:
  absl::StatusOr<void*> RawAlloc(size_t nbytes) override;
  void RawFree(void* ptr, size_t nbytes) override;
};

// C source -> shared object path, by running clang. Compiled objects are
// cached on disk in `dir`, keyed by a 128-bit hash of the source, the flags,
// `clang --version` and the host CPU; files appear atomically (rename), so
// concurrent processes may share the directory. Thread-safe.
class ClangCompiler : public Compiler {
 public:
  // `dir` is created (with parents) on first use; `clang` is the compiler
  // program, looked up in PATH unless it contains a '/'.
  ClangCompiler(std::string dir, std::string clang);

  // Returns the path of the .so holding the source's functions.
  absl::StatusOr<std::string> Compile(const std::string& source) override;
  // Compiles all sources that are not cached yet in ONE clang run (one
  // translation unit; the caller guarantees distinct external names) and
  // returns the combined .so's path for each of them. Falls back to one run
  // per source when the combined unit does not compile.
  absl::StatusOr<std::vector<std::string>> CompileMany(
      const std::vector<std::string>& sources) override;
  Stats stats() const override;

  const std::string& dir() const { return dir_; }
  // The flags passed to clang before the input and output arguments.
  static const std::vector<std::string>& Flags();

 private:
  // Finds clang, captures its version and creates the cache directory, once.
  absl::Status Init();
  // Cache file path for `source` (Init() must have succeeded).
  std::string PathFor(const std::string& source) const;
  // Runs clang on `source`, producing `out` atomically; counts `n` sources.
  absl::Status CompileTo(const std::string& source, const std::string& out, int n);

  std::string dir_;  // may fall back to /tmp at first use
  const std::string clang_;
  mutable absl::Mutex mu_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status init_status_ ABSL_GUARDED_BY(mu_);
  std::string clang_path_;  // written once by Init() under mu_, then read-only
  std::string key_prefix_;  // likewise: flags, clang version, CPU identity
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// The CPU device. Programs it loads and buffers allocated from it must not
// outlive it. Launches run synchronously on the calling thread plus the
// device's thread pool; Launch always waits. Thread-safe.
class CpuDevice : public Device {
 public:
  struct Options {
    // Cache root; kernels go to cache_dir + "/cpu". Empty: kiln::Env().cache_dir.
    std::string cache_dir;
    // Worker threads including the caller; <= 0: ThreadPool::DefaultThreads().
    int threads = 0;
    // The C compiler program.
    std::string clang = "clang";
  };

  CpuDevice();
  explicit CpuDevice(const Options& options);
  ~CpuDevice() override;

  std::string renderer() const override { return "c"; }
  Allocator& allocator() override { return allocator_; }
  Compiler& compiler() override { return compiler_; }
  // `binary` is a .so path from compiler(); `function` the kernel symbol.
  absl::StatusOr<std::unique_ptr<Program>> LoadProgram(const std::string& function,
                                                       const std::string& binary) override;
  int workers() const override { return pool_.num_threads(); }
  ThreadPool& pool() { return pool_; }

 private:
  HostAllocator allocator_;
  ClangCompiler compiler_;
  ThreadPool pool_;
  absl::Mutex mu_;
  std::map<std::string, void*> handles_ ABSL_GUARDED_BY(mu_);  // path -> dlopen handle
};

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_CPU_DEVICE_H_
