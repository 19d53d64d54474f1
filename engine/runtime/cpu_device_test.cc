#include "engine/runtime/cpu_device.h"
#include "engine/runtime/thread_pool.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

std::string NewTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp", "/kiln_cpu_XXXXXX");
  char* dir = mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  return tmpl;
}

CpuDevice::Options TestOptions(int threads = 2) {
  CpuDevice::Options o;
  o.cache_dir = NewTempDir();
  o.threads = threads;
  return o;
}

const char* kAddSource = R"(
void add(void** bufs, const long long* vars, long long start, long long end) {
  float* c = (float*)bufs[0];
  const float* a = (const float*)bufs[1];
  const float* b = (const float*)bufs[2];
  for (long long i = start; i < end; i++) c[i] = a[i] + b[i];
}
)";

// c[i] = a[i] * vars[0] + vars[1] for i < vars[2]; records which thread ran
// the first element of each chunk.
const char* kVarsSource = R"(
void axpb(void** bufs, const long long* vars, long long start, long long end) {
  int* c = (int*)bufs[0];
  const int* a = (const int*)bufs[1];
  for (long long i = start; i < end && i < vars[2]; i++) c[i] = a[i] * (int)vars[0] + (int)vars[1];
}
)";

// Large blocks are mapped on their own from a 2 MiB boundary (huge pages
// asked for); small ones come from the heap, 64-byte aligned. Both hold
// their bytes, are reused from the cache and are given back.
TEST(CpuDeviceTest, HostAllocatorBlocksSmallAndHuge) {
  HostAllocator alloc(/*cache_limit_bytes=*/size_t{64} << 20);
  for (size_t n : {size_t{100}, size_t{1} << 20, (size_t{4} << 20) + 12345, size_t{9} << 20}) {
    SCOPED_TRACE(n);
    absl::StatusOr<void*> p = alloc.Alloc(n);
    ASSERT_TRUE(p.ok()) << p.status();
    const uintptr_t at = reinterpret_cast<uintptr_t>(*p);
    EXPECT_EQ(at % HostAllocator::kAlignment, 0u);
    if (n >= (size_t{4} << 20)) {
      EXPECT_EQ(at % (size_t{2} << 20), 0u);
    }
    auto* bytes = static_cast<unsigned char*>(*p);
    for (size_t i = 0; i < n; i += 4093) bytes[i] = static_cast<unsigned char>(i * 7);
    bytes[n - 1] = 0xab;
    for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(bytes[i], static_cast<unsigned char>(i * 7));
    EXPECT_EQ(bytes[n - 1], 0xab);
    alloc.Free(*p, n);
    absl::StatusOr<void*> again = alloc.Alloc(n);  // the cached block
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *p);
    alloc.Free(*again, n);
  }
  alloc.ClearCache();  // unmaps / frees every block (ASan / LSan check the heap ones)
  EXPECT_EQ(alloc.stats().cached_bytes, 0u);
}

TEST(CpuDeviceTest, CompileLaunchSplitAcrossThreads) {
  CpuDevice dev(TestOptions(2));
  EXPECT_EQ(dev.renderer(), "c");
  EXPECT_EQ(dev.workers(), 2);
  absl::StatusOr<std::string> so = dev.compiler().Compile(kAddSource);
  ASSERT_TRUE(so.ok()) << so.status();
  absl::StatusOr<std::unique_ptr<Program>> prog = dev.LoadProgram("add", *so);
  ASSERT_TRUE(prog.ok()) << prog.status();
  EXPECT_EQ((*prog)->name(), "add");

  const int n = 1000;
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f * static_cast<float>(i);
  }
  BufferRef ba = *dev.NewBuffer(n * 4), bb = *dev.NewBuffer(n * 4), bc = *dev.NewBuffer(n * 4);
  ASSERT_TRUE(ba->CopyIn(a.data(), n * 4).ok());
  ASSERT_TRUE(bb->CopyIn(b.data(), n * 4).ok());
  LaunchDims dims;
  dims.global[0] = n;
  double seconds = -1;
  ASSERT_TRUE((*prog)->Launch({*bc->Ptr(), *ba->Ptr(), *bb->Ptr()}, {}, dims, true, &seconds).ok());
  EXPECT_GE(seconds, 0.0);
  ASSERT_TRUE(bc->CopyOut(c.data(), n * 4).ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], 1.5f * static_cast<float>(i)) << i;

  // single_thread runs the whole range inline.
  std::fill(c.begin(), c.end(), 0.0f);
  ASSERT_TRUE(bc->CopyIn(c.data(), n * 4).ok());
  dims.single_thread = true;
  ASSERT_TRUE((*prog)->Launch({*bc->Ptr(), *ba->Ptr(), *bb->Ptr()}, {}, dims, true, nullptr).ok());
  ASSERT_TRUE(bc->CopyOut(c.data(), n * 4).ok());
  EXPECT_EQ(c[999], 1.5f * 999);
  EXPECT_EQ(dev.compiler().stats().compiled, 1u);
}

TEST(CpuDeviceTest, KernelWithVars) {
  CpuDevice dev(TestOptions(3));
  absl::StatusOr<std::string> so = dev.compiler().Compile(kVarsSource);
  ASSERT_TRUE(so.ok()) << so.status();
  std::unique_ptr<Program> prog = std::move(dev.LoadProgram("axpb", *so)).value();
  std::vector<int> a(100), c(100, 7);
  for (int i = 0; i < 100; ++i) a[i] = i;
  LaunchDims dims;
  dims.global[0] = 100;
  ASSERT_TRUE(prog->Launch({c.data(), a.data()}, {3, -4, 90}, dims, true, nullptr).ok());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(c[i], i < 90 ? 3 * i - 4 : 7) << i;
}

// out[start] = the length of the chunk starting there.
const char* kChunksSource = R"(
void chunks(void** bufs, const long long* vars, long long start, long long end) {
  ((long long*)bufs[0])[start] = end - start;
}
)";

// A launch from a thread with a ThreadPool::Scope runs on the scope's pool
// (kilnd's per-instance threads), and workers() says so; the device's own
// pool again once the scope ends.
TEST(CpuDeviceTest, ScopedPoolRunsTheLaunches) {
  CpuDevice dev(TestOptions(2));
  absl::StatusOr<std::string> so = dev.compiler().Compile(kChunksSource);
  ASSERT_TRUE(so.ok()) << so.status();
  absl::StatusOr<std::unique_ptr<Program>> loaded = dev.LoadProgram("chunks", *so);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Program* prog = loaded->get();
  LaunchDims dims;
  dims.global[0] = 100;
  auto chunk_lengths = [&]() {
    std::vector<long long> out(100, 0);
    EXPECT_TRUE(prog->Launch({out.data()}, {}, dims, true, nullptr).ok());
    std::vector<long long> lengths;
    for (long long v : out)
      if (v != 0) lengths.push_back(v);
    return lengths;
  };
  EXPECT_EQ(dev.workers(), 2);
  EXPECT_EQ(chunk_lengths(), (std::vector<long long>{50, 50}));
  ThreadPool one(1), three(3);
  {
    ThreadPool::Scope scope(&one);
    EXPECT_EQ(dev.workers(), 1);
    EXPECT_EQ(chunk_lengths(), (std::vector<long long>{100}));
    {
      ThreadPool::Scope inner(&three);
      EXPECT_EQ(dev.workers(), 3);
      EXPECT_EQ(chunk_lengths(), (std::vector<long long>{34, 33, 33}));
    }
    EXPECT_EQ(dev.workers(), 1);
    ThreadPool::Scope none(nullptr);  // the device's own pool
    EXPECT_EQ(dev.workers(), 2);
  }
  EXPECT_EQ(dev.workers(), 2);
  EXPECT_EQ(chunk_lengths(), (std::vector<long long>{50, 50}));
}

TEST(CpuDeviceTest, DiskCacheHitAcrossDevices) {
  CpuDevice::Options opts = TestOptions();
  std::string path;
  {
    CpuDevice dev(opts);
    path = *dev.compiler().Compile(kAddSource);
    EXPECT_EQ(dev.compiler().stats().compiled, 1u);
    EXPECT_EQ(dev.compiler().stats().disk_hits, 0u);
    EXPECT_EQ(*dev.compiler().Compile(kAddSource), path);
    EXPECT_EQ(dev.compiler().stats().disk_hits, 1u);
  }
  EXPECT_EQ(path.rfind(opts.cache_dir + "/cpu/", 0), 0u) << path;
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0);
  // A new device (as a new process would) finds the object on disk.
  CpuDevice dev2(opts);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(*dev2.compiler().Compile(kAddSource), path);
  EXPECT_EQ(dev2.compiler().stats().compiled, 0u);
  EXPECT_EQ(dev2.compiler().stats().disk_hits, 1u);
  std::printf("disk cache hit in %.2f ms (first use, includes finding clang)\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_TRUE(dev2.LoadProgram("add", path).ok());
  // A different source gets a different file.
  std::string other = std::string(kAddSource) + "\n// changed\n";
  EXPECT_NE(*dev2.compiler().Compile(other), path);
}

TEST(CpuDeviceTest, CompileErrorContainsClangMessage) {
  CpuDevice dev(TestOptions());
  absl::StatusOr<std::string> so =
      dev.compiler().Compile("void broken(void** bufs) { undeclared_thing = 1; }\n");
  ASSERT_FALSE(so.ok());
  EXPECT_EQ(so.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(so.status().message().find("undeclared_thing"), std::string::npos) << so.status();
  EXPECT_NE(so.status().message().find("error"), std::string::npos) << so.status();
}

TEST(CpuDeviceTest, MissingCompilerIsNamed) {
  CpuDevice::Options opts = TestOptions();
  opts.clang = "kiln-no-such-clang";
  CpuDevice dev(opts);
  absl::StatusOr<std::string> so = dev.compiler().Compile(kAddSource);
  ASSERT_FALSE(so.ok());
  EXPECT_NE(so.status().message().find("kiln-no-such-clang"), std::string::npos) << so.status();
}

TEST(CpuDeviceTest, LoadErrors) {
  CpuDevice dev(TestOptions());
  std::string so = *dev.compiler().Compile(kAddSource);
  EXPECT_EQ(dev.LoadProgram("nope", so).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(dev.LoadProgram("add", "/nonexistent/kernel.so").ok());
}

std::string ScaleSource(int k) {
  return absl::StrCat("void scale", k,
                      "(void** bufs, const long long* vars, long long start, long long end) {\n"
                      "  int* out = (int*)bufs[0];\n"
                      "  for (long long i = start; i < end; i++) out[i] = (int)i * ",
                      k, ";\n}\n");
}

TEST(CpuDeviceTest, CompileManyInOneClangRun) {
  CpuDevice::Options options = TestOptions();
  options.compile_jobs = 1;
  CpuDevice dev(options);
  // One source is compiled beforehand: it is served from the cache.
  ASSERT_TRUE(dev.compiler().Compile(ScaleSource(2)).ok());
  std::vector<std::string> sources = {ScaleSource(2), ScaleSource(3), ScaleSource(5),
                                      ScaleSource(7)};
  auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<std::string>> bins = dev.compiler().CompileMany(sources);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(bins.ok()) << bins.status();
  ASSERT_EQ(bins->size(), 4u);
  std::printf("CompileMany of 3 uncached kernels: %.1f ms\n", ms);
  Compiler::Stats stats = dev.compiler().stats();
  EXPECT_EQ(stats.compiled, 1u + 3u);
  EXPECT_EQ(stats.disk_hits, 1u);
  // The three new kernels share one shared object.
  EXPECT_EQ((*bins)[1], (*bins)[2]);
  EXPECT_EQ((*bins)[2], (*bins)[3]);
  EXPECT_NE((*bins)[0], (*bins)[1]);
  for (int i = 0; i < 4; ++i) {
    int k = std::vector<int>{2, 3, 5, 7}[i];
    auto prog = dev.LoadProgram(absl::StrCat("scale", k), (*bins)[i]);
    ASSERT_TRUE(prog.ok()) << prog.status();
    std::vector<int> out(10, 0);
    LaunchDims dims;
    dims.global[0] = 10;
    ASSERT_TRUE((*prog)->Launch({out.data()}, {}, dims, true, nullptr).ok());
    EXPECT_EQ(out[9], 9 * k);
  }
  // Now every source is cached, individually too.
  ASSERT_TRUE(dev.compiler().CompileMany(sources).ok());
  EXPECT_EQ(dev.compiler().stats().compiled, 4u);
  EXPECT_EQ(dev.compiler().stats().disk_hits, 5u);
  ASSERT_TRUE(dev.compiler().Compile(ScaleSource(5)).ok());
  EXPECT_EQ(dev.compiler().stats().compiled, 4u);
}

// With two jobs, five new kernels go to two clang runs (two shared
// objects), each loadable and right; a repeated source shares its path.
TEST(CpuDeviceTest, CompileManySplitsAcrossJobs) {
  CpuDevice::Options options = TestOptions();
  options.compile_jobs = 2;
  CpuDevice dev(options);
  const std::vector<int> ks = {2, 3, 5, 7, 11, 3};
  std::vector<std::string> sources;
  for (int k : ks) sources.push_back(ScaleSource(k));
  absl::StatusOr<std::vector<std::string>> bins = dev.compiler().CompileMany(sources);
  ASSERT_TRUE(bins.ok()) << bins.status();
  ASSERT_EQ(bins->size(), ks.size());
  EXPECT_EQ(std::set<std::string>(bins->begin(), bins->end()).size(), 2u);
  EXPECT_EQ((*bins)[1], (*bins)[5]);
  EXPECT_EQ(dev.compiler().stats().compiled, 5u);
  for (size_t i = 0; i < ks.size(); ++i) {
    auto prog = dev.LoadProgram(absl::StrCat("scale", ks[i]), (*bins)[i]);
    ASSERT_TRUE(prog.ok()) << prog.status();
    std::vector<int> out(10, 0);
    LaunchDims dims;
    dims.global[0] = 10;
    ASSERT_TRUE((*prog)->Launch({out.data()}, {}, dims, true, nullptr).ok());
    EXPECT_EQ(out[9], 9 * ks[i]);
  }
  // Every source is now cached under its own key too.
  ASSERT_TRUE(dev.compiler().CompileMany(sources).ok());
  EXPECT_EQ(dev.compiler().stats().compiled, 5u);
}

// A kernel library is unloaded with the last program loaded from it, so a
// server evicting kernels does not keep every library it ever loaded.
TEST(CpuDeviceTest, LibraryUnloadsWithItsLastProgram) {
  CpuDevice::Options options = TestOptions();
  options.compile_jobs = 1;
  CpuDevice dev(options);
  absl::StatusOr<std::vector<std::string>> bins =
      dev.compiler().CompileMany({ScaleSource(2), ScaleSource(3)});
  ASSERT_TRUE(bins.ok()) << bins.status();
  EXPECT_EQ(dev.loaded_libraries(), 0u);
  auto p2 = dev.LoadProgram("scale2", (*bins)[0]);
  auto p3 = dev.LoadProgram("scale3", (*bins)[1]);
  ASSERT_TRUE(p2.ok() && p3.ok());
  EXPECT_EQ(dev.loaded_libraries(), 1u);  // one shared object holds both
  p2->reset();
  EXPECT_EQ(dev.loaded_libraries(), 1u);
  std::vector<int> out(10, 0);
  LaunchDims dims;
  dims.global[0] = 10;
  ASSERT_TRUE((*p3)->Launch({out.data()}, {}, dims, true, nullptr).ok());
  EXPECT_EQ(out[9], 27);
  p3->reset();
  EXPECT_EQ(dev.loaded_libraries(), 0u);
  // Loading again works.
  auto again = dev.LoadProgram("scale2", (*bins)[0]);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(dev.loaded_libraries(), 1u);
}

TEST(CpuDeviceTest, CompileManyFallsBackWhenSourcesClash) {
  CpuDevice::Options options = TestOptions();
  options.compile_jobs = 1;  // both sources in one unit
  CpuDevice dev(options);
  auto src = [](const char* name) {
    return absl::StrCat("static int helper(int x) { return x + 1; }\n", "void ", name,
                        "(void** bufs, const long long* vars, long long start, long long end) {\n"
                        "  int* out = (int*)bufs[0];\n"
                        "  for (long long i = start; i < end; i++) out[i] = helper((int)i);\n}\n");
  };
  absl::StatusOr<std::vector<std::string>> bins = dev.compiler().CompileMany({src("k1"), src("k2")});
  ASSERT_TRUE(bins.ok()) << bins.status();
  EXPECT_NE((*bins)[0], (*bins)[1]);
  EXPECT_TRUE(dev.LoadProgram("k1", (*bins)[0]).ok());
  EXPECT_TRUE(dev.LoadProgram("k2", (*bins)[1]).ok());
}

TEST(CpuDeviceTest, ConcurrentLaunchesAndCompiles) {
  CpuDevice dev(TestOptions(2));
  std::string so = *dev.compiler().Compile(kAddSource);
  std::unique_ptr<Program> prog = std::move(dev.LoadProgram("add", so)).value();
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      ASSERT_TRUE(dev.compiler().Compile(kAddSource).ok());
      std::vector<float> a(257, 1.0f + t), b(257, 2.0f), c(257, 0.0f);
      LaunchDims dims;
      dims.global[0] = 257;
      for (int i = 0; i < 200; ++i) {
        ASSERT_TRUE(prog->Launch({c.data(), a.data(), b.data()}, {}, dims, true, nullptr).ok());
        ASSERT_EQ(c[0], 3.0f + t);
        ASSERT_EQ(c[256], 3.0f + t);
      }
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace
}  // namespace kiln
