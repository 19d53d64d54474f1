#include "engine/runtime/cpu_device.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"
#include "engine/runtime/disk_cache.h"

extern char** environ;

namespace kiln {
namespace {

constexpr size_t kMaxErrorChars = 4000;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

std::string ErrnoText(int err) { return std::strerror(err); }

bool IsExecutable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Resolves `program` through PATH (or checks it when it contains a '/').
absl::StatusOr<std::string> FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (IsExecutable(program)) return program;
    return absl::FailedPreconditionError(absl::StrCat(
        "the CPU device needs the C compiler '", program, "', which is not an executable file"));
  }
  const char* env_path = std::getenv("PATH");
  std::string path = (env_path != nullptr && *env_path != '\0') ? env_path
                                                                 : "/usr/local/bin:/usr/bin:/bin";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", program);
    if (IsExecutable(candidate)) return candidate;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the CPU device needs the C compiler '", program, "', which was not found in PATH (", path,
      "); install it (Debian: apt-get install clang)"));
}

// mkdir -p.
absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty cache directory");
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(
          absl::StrCat("cannot create directory ", prefix, ": ", ErrnoText(errno)));
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InternalError(absl::StrCat("cache path ", path, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status WriteNewFile(const std::string& path, const std::string& content) {
  int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create ", path, ": ", ErrnoText(errno)));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t w = write(fd, content.data() + done, content.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = errno;
      close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", path, ": ", ErrnoText(err)));
    }
    done += static_cast<size_t>(w);
  }
  close(fd);
  return absl::OkStatus();
}

// Runs argv (argv[0] is a full path) with stdin from `stdin_path` and
// stdout + stderr captured into *output. Returns the exit status.
absl::StatusOr<int> RunProcess(const std::vector<std::string>& argv, const std::string& stdin_path,
                               std::string* output) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, stdin_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat("cannot run ", argv[0], ": ", ErrnoText(rc)));
  }
  char buf[4096];
  while (true) {
    ssize_t r = read(fds[0], buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    output->append(buf, static_cast<size_t>(r));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", ErrnoText(errno)));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Model name and feature flags of the host CPU (part of the cache key, since
// kernels are compiled with -march=native).
std::string CpuIdentity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0)) {
      flags = line;
    }
  }
  return model + "\n" + flags;
}

// Two independent 64-bit hashes (FNV-1a and MurmurHash64A-style mixing)
// give a 128-bit content key.
uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t Murmur64(const std::string& s, uint64_t seed) {
  const uint64_t m = 0xc6a4a7935bd1e995ULL;
  const int r = 47;
  uint64_t h = seed ^ (s.size() * m);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t k;
    std::memcpy(&k, s.data() + i, 8);
    k *= m;
    k ^= k >> r;
    k *= m;
    h ^= k;
    h *= m;
  }
  uint64_t tail = 0;
  for (size_t j = 0; i + j < s.size(); ++j) {
    tail |= uint64_t{static_cast<unsigned char>(s[i + j])} << (8 * j);
  }
  if (i < s.size()) {
    h ^= tail;
    h *= m;
  }
  h ^= h >> r;
  h *= m;
  h ^= h >> r;
  return h;
}

std::string HexKey(const std::string& s) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                static_cast<unsigned long long>(Fnv1a64(s)),
                static_cast<unsigned long long>(Murmur64(s, 0x6b696c6e)));
  return buf;
}

class CpuProgram : public Program {
 public:
  using KernelFn = void (*)(void**, const long long*, long long, long long);
  static_assert(sizeof(long long) == sizeof(int64_t), "kernel ABI needs 64-bit long long");

  CpuProgram(std::string name, KernelFn fn, ThreadPool* pool, std::shared_ptr<void> library)
      : Program(std::move(name)), fn_(fn), pool_(pool), library_(std::move(library)) {}

  absl::Status Launch(const std::vector<void*>& bufs, const std::vector<int64_t>& vars,
                      const LaunchDims& dims, bool /*wait*/, double* seconds) override {
    const auto start = std::chrono::steady_clock::now();
    void** b = const_cast<void**>(bufs.data());
    const long long* v = reinterpret_cast<const long long*>(vars.data());
    const int64_t n = dims.global[0];
    if (dims.single_thread || n <= 1) {
      fn_(b, v, 0, n);
    } else {
      KernelFn fn = fn_;
      ThreadPool::ScopedOr(pool_)->ParallelFor(n, [fn, b, v](int64_t begin, int64_t end) { fn(b, v, begin, end); });
    }
    if (seconds != nullptr) *seconds = Seconds(start);
    return absl::OkStatus();
  }

 private:
  const KernelFn fn_;
  ThreadPool* const pool_;
  const std::shared_ptr<void> library_;  // keeps fn_'s shared object loaded
};

}  // namespace

// ------------------------------------------------------------ HostAllocator

HostAllocator::~HostAllocator() { ClearCache(); }

namespace {

// Blocks of kHugeFrom bytes and more are mapped on their own, starting on a
// 2 MiB boundary, and ask for transparent huge pages (Debian's default THP
// mode is "madvise"): a model's weights and large activations then take one
// page fault and one TLB entry per 2 MiB instead of per 4 KiB. Their tail
// past the last whole 2 MiB stays in small pages, so no memory is added.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeFrom = size_t{4} << 20;

size_t PageRounded(size_t nbytes) {
  const size_t page = 4096;
  return (nbytes + page - 1) / page * page;
}

// RawAlloc's block size for `nbytes` (0 when it overflows), and whether it is
// mapped on its own; RawFree recomputes both from the same nbytes.
size_t BlockBytes(size_t nbytes) {
  const size_t a = HostAllocator::kAlignment;
  if (nbytes == 0) return a;
  return nbytes > SIZE_MAX - a ? 0 : (nbytes + a - 1) / a * a;
}
bool MappedOnItsOwn(size_t block) {
  return block >= kHugeFrom && block <= SIZE_MAX - 2 * kHugePage;
}

}  // namespace

absl::StatusOr<void*> HostAllocator::RawAlloc(size_t nbytes) {
  const size_t rounded = BlockBytes(nbytes);
  if (rounded == 0) return absl::ResourceExhaustedError("allocation size overflows");
  auto out_of_memory = [&] {
    return absl::ResourceExhaustedError(absl::StrCat("out of host memory allocating ", nbytes,
                                                     " bytes"));
  };
  if (MappedOnItsOwn(rounded)) {
    const size_t len = PageRounded(rounded), span = len + kHugePage;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return out_of_memory();
    const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
    if (start > base) munmap(raw, start - base);  // page-aligned: both trims succeed
    if (base + span > start + len)
      munmap(reinterpret_cast<void*>(start + len), base + span - start - len);
    madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);  // a hint: may be refused
    return reinterpret_cast<void*>(start);
  }
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (p == nullptr) return out_of_memory();
  return p;
}

void HostAllocator::RawFree(void* ptr, size_t nbytes) {
  const size_t rounded = BlockBytes(nbytes);
  if (MappedOnItsOwn(rounded)) {
    munmap(ptr, PageRounded(rounded));
    return;
  }
  std::free(ptr);
}

absl::Status HostAllocator::CopyIn(void* dst, const void* src, size_t nbytes) {
  if (nbytes != 0) std::memcpy(dst, src, nbytes);
  return absl::OkStatus();
}

absl::Status HostAllocator::CopyOut(void* dst, const void* src, size_t nbytes) {
  if (nbytes != 0) std::memcpy(dst, src, nbytes);
  return absl::OkStatus();
}

// ------------------------------------------------------------ ClangCompiler

ClangCompiler::ClangCompiler(std::string dir, std::string clang, int jobs)
    : dir_(std::move(dir)),
      clang_(std::move(clang)),
      jobs_(jobs > 0 ? jobs : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {}

const std::vector<std::string>& ClangCompiler::Flags() {
  static const std::vector<std::string> flags = {
      "-O2", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fwrapv", "-fPIC"};
  return flags;
}

namespace {

// What identifies the compiler binary for the cache key: its resolved path,
// size and modification time (an upgrade changes them). Cheaper than
// `clang --version`, which loads all of LLVM (0.1-0.2 s on a cold start).
absl::StatusOr<std::string> ProgramIdentity(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr)
    return absl::FailedPreconditionError(absl::StrCat("cannot resolve ", path, ": ",
                                                      ErrnoText(errno)));
  struct stat st;
  if (stat(resolved, &st) != 0)
    return absl::FailedPreconditionError(absl::StrCat("cannot stat ", resolved, ": ",
                                                      ErrnoText(errno)));
  return absl::StrCat(resolved, " ", st.st_size, " ", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

}  // namespace

absl::Status ClangCompiler::Init() {
  absl::MutexLock lock(&mu_);
  if (initialized_) return init_status_;
  initialized_ = true;
  init_status_ = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(clang_path_, FindProgram(clang_));
    ASSIGN_OR_RETURN(std::string version, ProgramIdentity(clang_path_));
    // Linking with ld itself skips a second start of the clang driver
    // (~0.2 s a run); without ld in PATH, clang links.
    if (absl::StatusOr<std::string> ld = FindProgram("ld"); ld.ok()) ld_path_ = *ld;
    if (absl::Status made = MakeDirs(dir_); !made.ok()) {
      // An unwritable cache (read-only home, sandbox) falls back to /tmp.
      std::string fallback = absl::StrCat("/tmp/kiln-cache-", getuid(), "/cpu");
      if (!MakeDirs(fallback).ok()) return made;
      std::fprintf(stderr, "kiln: kernel cache %s is not writable (%s); using %s\n", dir_.c_str(),
                   std::string(made.message()).c_str(), fallback.c_str());
      dir_ = fallback;
    }
    key_prefix_ = absl::StrCat(absl::StrJoin(Flags(), " "), "\n", version, "\n", CpuIdentity(),
                               "\n");
    return absl::OkStatus();
  }();
  return init_status_;
}

std::string ClangCompiler::PathFor(const std::string& source) const {
  return absl::StrCat(dir_, "/", HexKey(key_prefix_ + source), ".so");
}

absl::Status ClangCompiler::CompileTo(const std::string& source, const std::string& out, int n) {
  const auto start = std::chrono::steady_clock::now();
  const std::string tmp = out + UniqueTempSuffix();
  const std::string tmp_c = tmp + ".c";
  const std::string tmp_so = tmp + ".so";
  const std::string tmp_o = tmp + ".o";
  RETURN_IF_ERROR(WriteNewFile(tmp_c, source));
  std::vector<std::string> argv = {clang_path_};
  argv.insert(argv.end(), Flags().begin(), Flags().end());
  argv.insert(argv.end(), {"-c", "-x", "c", "-", "-o", tmp_o});
  std::string output;
  absl::StatusOr<int> rc = RunProcess(argv, tmp_c, &output);
  unlink(tmp_c.c_str());
  std::string step = "clang";
  if (rc.ok() && *rc == 0) {
    step = ld_path_.empty() ? "clang (linking)" : "ld";
    std::vector<std::string> link = {ld_path_.empty() ? clang_path_ : ld_path_, "-shared", tmp_o,
                                     "-o", tmp_so, "-lm"};
    rc = RunProcess(link, "/dev/null", &output);
  }
  unlink(tmp_o.c_str());
  if (!rc.ok() || *rc != 0) {
    unlink(tmp_so.c_str());
    if (!rc.ok()) return rc.status();
    if (output.size() > kMaxErrorChars) output = output.substr(0, kMaxErrorChars) + "\n...";
    return absl::InvalidArgumentError(
        absl::StrCat(step, " failed (exit ", *rc, ") compiling a CPU kernel:\n", output));
  }
  if (rename(tmp_so.c_str(), out.c_str()) != 0) {
    int err = errno;
    unlink(tmp_so.c_str());
    return absl::InternalError(absl::StrCat("cannot rename ", tmp_so, " to ", out, ": ",
                                            ErrnoText(err)));
  }
  absl::MutexLock lock(&mu_);
  stats_.compiled += n;
  stats_.compile_seconds += Seconds(start);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ClangCompiler::Compile(const std::string& source) {
  RETURN_IF_ERROR(Init());
  std::string path = PathFor(source);
  if (IsRegularFile(path)) {
    absl::MutexLock lock(&mu_);
    ++stats_.disk_hits;
    return path;
  }
  RETURN_IF_ERROR(CompileTo(source, path, 1));
  return path;
}

namespace {

// Splits `items` into at most `groups` lists of about equal total source
// length (longest first, each onto the lightest list so far): the parallel
// clang runs of CompileMany then finish at about the same time.
std::vector<std::vector<size_t>> BalanceGroups(const std::vector<size_t>& items,
                                               const std::vector<std::string>& sources,
                                               int groups) {
  std::vector<size_t> order = items;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
  const size_t n = std::max<size_t>(1, std::min<size_t>(groups, order.size()));
  std::vector<std::vector<size_t>> out(n);
  std::vector<size_t> load(n, 0);
  for (size_t i : order) {
    size_t g = std::min_element(load.begin(), load.end()) - load.begin();
    out[g].push_back(i);
    load[g] += sources[i].size();
  }
  return out;
}

}  // namespace

absl::Status ClangCompiler::CompileGroup(const std::vector<std::string>& sources,
                                         const std::vector<size_t>& group,
                                         std::vector<std::string>* paths) {
  if (group.size() == 1) return CompileTo(sources[group[0]], (*paths)[group[0]], 1);
  std::string combined;
  for (size_t i : group) absl::StrAppend(&combined, sources[i], "\n");
  const std::string combined_path = PathFor(combined);
  absl::Status status = absl::OkStatus();
  if (!IsRegularFile(combined_path)) {
    status = CompileTo(combined, combined_path, static_cast<int>(group.size()));
  }
  if (!status.ok()) {
    // The sources do not combine (e.g. clashing helper definitions):
    // compile them one by one, which also attributes errors precisely.
    for (size_t i : group) RETURN_IF_ERROR(CompileTo(sources[i], (*paths)[i], 1));
    return absl::OkStatus();
  }
  for (size_t i : group) {
    // Also file the combined object under each source's own key so that
    // later single compiles hit the cache (best effort).
    if (link(combined_path.c_str(), (*paths)[i].c_str()) != 0) {
      // Not filed under its own key: a later single compile of it compiles.
    }
    (*paths)[i] = combined_path;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ClangCompiler::CompileMany(
    const std::vector<std::string>& sources) {
  RETURN_IF_ERROR(Init());
  std::vector<std::string> paths(sources.size());
  std::vector<size_t> missing;  // indices of distinct uncached sources
  std::map<std::string, size_t> first_of;  // cache path of a missing source -> its index
  std::vector<std::pair<size_t, size_t>> repeats;  // (index, index of its first occurrence)
  uint64_t hits = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    paths[i] = PathFor(sources[i]);
    if (IsRegularFile(paths[i])) {
      ++hits;
      continue;
    }
    auto [it, added] = first_of.emplace(paths[i], i);
    if (added) {
      missing.push_back(i);
    } else {
      repeats.push_back({i, it->second});
    }
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.disk_hits += hits;
  }
  // One clang run per group, the groups in parallel (one per core): clang
  // is single-threaded, and a model's first call is mostly compiling.
  std::vector<std::vector<size_t>> groups = BalanceGroups(missing, sources, jobs_);
  std::vector<absl::Status> status(groups.size());
  std::vector<std::thread> threads;
  std::vector<size_t> inline_groups = {0};
  for (size_t g = 1; g < groups.size(); ++g) {
    try {
      threads.emplace_back([&, g] { status[g] = CompileGroup(sources, groups[g], &paths); });
    } catch (const std::system_error&) {
      inline_groups.push_back(g);  // no thread to be had: compile it here
    }
  }
  for (size_t g : inline_groups)
    if (g < groups.size() && !groups[g].empty()) status[g] = CompileGroup(sources, groups[g], &paths);
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  for (auto [i, first] : repeats) paths[i] = paths[first];
  return paths;
}

Compiler::Stats ClangCompiler::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

// ---------------------------------------------------------------- CpuDevice

CpuDevice::CpuDevice() : CpuDevice(Options()) {}

CpuDevice::CpuDevice(const Options& options)
    : Device("CPU"),
      compiler_((options.cache_dir.empty() ? Env().cache_dir : options.cache_dir) + "/cpu",
                options.clang, options.compile_jobs),
      pool_(options.threads) {}

CpuDevice::~CpuDevice() = default;

void CpuDevice::RunOnWorkers(const std::function<void(int worker)>& fn) {
  ThreadPool& pool = *ThreadPool::ScopedOr(&pool_);
  pool.ParallelFor(pool.num_threads(), [&fn](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) fn(static_cast<int>(w));
  });
}

absl::StatusOr<std::unique_ptr<Program>> CpuDevice::LoadProgram(const std::string& function,
                                                                const std::string& binary) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<void> library = libraries_[binary].lock();
  if (library == nullptr) {
    void* handle = dlopen(binary.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      libraries_.erase(binary);
      return absl::InvalidArgumentError(
          absl::StrCat("cannot load CPU kernel library ", binary, ": ", err ? err : "unknown"));
    }
    // Unloaded when the last program from it is gone (kernels evicted from
    // the engine's cache), so a long-running server does not accumulate
    // libraries.
    library = std::shared_ptr<void>(handle, [](void* h) { dlclose(h); });
    libraries_[binary] = library;
    // Forget the entries of libraries already unloaded.
    for (auto it = libraries_.begin(); it != libraries_.end();)
      it = it->second.expired() ? libraries_.erase(it) : std::next(it);
  }
  dlerror();
  void* sym = dlsym(library.get(), function.c_str());
  if (sym == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("kernel function '", function, "' not found in ", binary));
  }
  return std::unique_ptr<Program>(std::make_unique<CpuProgram>(
      function, reinterpret_cast<CpuProgram::KernelFn>(sym), &pool_, std::move(library)));
}

size_t CpuDevice::loaded_libraries() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [path, library] : libraries_) n += library.expired() ? 0 : 1;
  return n;
}

}  // namespace kiln
