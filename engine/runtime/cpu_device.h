// The "CPU" device: C kernels compiled by clang into shared objects, loaded
// with dlopen and run on a persistent thread pool.
//
// Kernel ABI (what the C renderer emits):
//   void NAME(void** bufs, const long long* vars, long long start, long long end);
// The kernel runs the iterations [start, end) of its parallel loop (one of
// its global loops, where it stands in the loop nest: Kernel::ParallelAxis);
// a launch of global size G splits [0, G) across the pool's threads.
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
  bool host_addressable() const override { return true; }
  absl::Status CopyOut(void* dst, const void* src, size_t nbytes) override;

 protected:
  absl::StatusOr<void*> RawAlloc(size_t nbytes) override;
  void RawFree(void* ptr, size_t nbytes) override;
};

// C source -> shared object path, by running clang. Compiled objects are
// cached on disk in `dir`, keyed by a 128-bit hash of the source, the flags,
// the clang binary (path, size, mtime) and the host CPU; files appear atomically (rename), so
// concurrent processes may share the directory. Thread-safe.
class ClangCompiler : public Compiler {
 public:
  // `dir` is created (with parents) on first use; `clang` is the compiler
  // program, looked up in PATH unless it contains a '/'. `jobs` clang runs
  // at most go in parallel in CompileMany (<= 0: one per hardware thread).
  ClangCompiler(std::string dir, std::string clang, int jobs = 0);

  // Returns the path of the .so holding the source's functions.
  absl::StatusOr<std::string> Compile(const std::string& source) override;
  // Compiles all sources that are not cached yet in at most `jobs` parallel
  // clang runs, each one translation unit of several sources (the caller
  // guarantees distinct external names), and returns, per source, the path
  // of the .so holding it. A group whose combined unit does not compile
  // falls back to one run per source.
  absl::StatusOr<std::vector<std::string>> CompileMany(
      const std::vector<std::string>& sources) override;
  Stats stats() const override;

  const std::string& dir() const { return dir_; }
  // The flags passed to clang before the input and output arguments.
  static const std::vector<std::string>& Flags();

 private:
  // Finds clang and ld, identifies clang and creates the cache directory, once.
  absl::Status Init();
  // Cache file path for `source` (Init() must have succeeded).
  std::string PathFor(const std::string& source) const;
  // Runs clang on `source`, producing `out` atomically; counts `n` sources.
  absl::Status CompileTo(const std::string& source, const std::string& out, int n);
  // Compiles sources[i] for i in `group` as one unit into a cached .so and
  // points (*paths)[i] at it (paths[i] holds the source's own cache path).
  absl::Status CompileGroup(const std::vector<std::string>& sources,
                            const std::vector<size_t>& group, std::vector<std::string>* paths);

  std::string dir_;  // may fall back to /tmp at first use
  const std::string clang_;
  const int jobs_;
  mutable absl::Mutex mu_;
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status init_status_ ABSL_GUARDED_BY(mu_);
  std::string clang_path_;  // written once by Init() under mu_, then read-only
  std::string ld_path_;     // likewise; empty: clang links
  std::string key_prefix_;  // likewise: flags, clang identity, CPU identity
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// The CPU device. Programs it loads and buffers allocated from it must not
// outlive it. Launches run synchronously on the calling thread plus the
// device's thread pool (or the ThreadPool::Scope's pool of the calling
// thread, when it has one); Launch always waits. Thread-safe.
class CpuDevice : public Device {
 public:
  struct Options {
    // Cache root; kernels go to cache_dir + "/cpu". Empty: kiln::Env().cache_dir.
    std::string cache_dir;
    // Worker threads including the caller; <= 0: ThreadPool::DefaultThreads().
    int threads = 0;
    // The C compiler program.
    std::string clang = "clang";
    // Parallel clang runs when compiling many kernels; <= 0: one per
    // hardware thread.
    int compile_jobs = 0;
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
  // The threads a launch from the calling thread runs on (its scoped pool's,
  // else the device pool's).
  int workers() const override { return ThreadPool::ScopedOr(&pool_)->num_threads(); }
  // One call per thread of that same pool (kernels launched inside find it
  // busy and run inline).
  void RunOnWorkers(const std::function<void(int worker)>& fn) override;
  ThreadPool& pool() { return pool_; }
  // Kernel libraries loaded now (each stays loaded while a program from it
  // lives).
  size_t loaded_libraries() const;

 private:
  HostAllocator allocator_;
  ClangCompiler compiler_;
  ThreadPool pool_;
  mutable absl::Mutex mu_;
  // path -> the loaded shared object, owned by the programs loaded from it.
  std::map<std::string, std::weak_ptr<void>> libraries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_CPU_DEVICE_H_
