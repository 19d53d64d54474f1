// ONNX backend conformance: every test directory of Debian's
// libonnx-testdata (node, pytorch-converted, pytorch-operator, simple) is
// one gtest case run on the CPU device (KILN_CONFORMANCE_DEVICE picks another:
// conformance_opencl_test runs the suite on OPENCL).
//
// skip_list.txt names tests that cannot pass by nature (skipped, with the
// reason); known_failures.txt names tests kiln does not pass yet (reported
// as skipped "known failure: ..."; one that passes is announced). Every
// other test must pass. After the run, one line per folder goes to stdout:
//   conformance node: P passed, F failed, S skipped
//
// The cases run up front on KILN_CONFORMANCE_JOBS threads (default 2; the
// kernels of one case compile in one clang run and land in the on-disk
// cache); the gtest bodies then report their results.
// KILN_ONNX_TESTDATA overrides the data root; KILN_CONFORMANCE_REPORT=file
// writes one line per case run (name, seconds, status).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "engine/base/flags.h"
#include "engine/runtime/device.h"
#include "gtest/gtest.h"
#include "tests/conformance/case_list.h"
#include "tests/conformance/case_runner.h"

namespace kiln {
namespace {

const char* const kFolders[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
constexpr char kDefaultRoot[] = "/usr/share/libonnx-testdata/data";

std::string SuiteOf(const std::string& folder) {
  return absl::StrReplaceAll(folder, {{"-", "_"}});
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> SubDirs(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != ".." && IsDir(dir + "/" + name)) out.push_back(name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Case {
  std::string folder, name, dir;
  const std::string* skip = nullptr;   // reason
  const std::string* known = nullptr;  // reason
  absl::Status result = absl::UnknownError("not run");
  bool ran = false;
  double seconds = 0;
};

struct Suite {
  DeviceRegistry* registry = nullptr;
  Engine* engine = nullptr;
  CaseList skip, known;
  std::vector<std::unique_ptr<Case>> cases;
  std::vector<std::string> unexpected_passes;
  absl::Mutex mu;
};

Suite& TheSuite() {
  static Suite* s = new Suite();
  return *s;
}

void RunCase(Case* c) {
  auto start = std::chrono::steady_clock::now();
  c->result = RunConformanceCase(c->dir, TheSuite().engine, GetEnvString("KILN_CONFORMANCE_DEVICE", "CPU"));
  c->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  c->ran = true;
}

// Runs the cases gtest selected, before their bodies report.
class PreRun : public ::testing::Environment {
 public:
  void SetUp() override {
    std::vector<Case*> todo;
    const ::testing::UnitTest& ut = *::testing::UnitTest::GetInstance();
    std::map<std::string, Case*> by_name;
    for (auto& c : TheSuite().cases) by_name[SuiteOf(c->folder) + "." + c->name] = c.get();
    for (int i = 0; i < ut.total_test_suite_count(); ++i) {
      const ::testing::TestSuite* s = ut.GetTestSuite(i);
      for (int j = 0; j < s->total_test_count(); ++j) {
        const ::testing::TestInfo* t = s->GetTestInfo(j);
        auto it = by_name.find(std::string(s->name()) + "." + t->name());
        if (t->should_run() && it != by_name.end() && !it->second->skip)
          todo.push_back(it->second);
      }
    }
    int jobs = static_cast<int>(GetEnvInt("KILN_CONFORMANCE_JOBS", 2));
    jobs = std::max(1, std::min<int>(jobs, static_cast<int>(todo.size())));
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t k; (k = next.fetch_add(1)) < todo.size();) RunCase(todo[k]);
    };
    std::vector<std::thread> threads;
    for (int i = 1; i < jobs; ++i) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
  }
};

class CaseTest : public ::testing::Test {
 public:
  explicit CaseTest(Case* c) : c_(c) {}
  void TestBody() override {
    if (c_->skip) GTEST_SKIP() << *c_->skip;
    if (!c_->ran) RunCase(c_);
    if (c_->known) {
      if (!c_->result.ok()) GTEST_SKIP() << "known failure: " << *c_->known << " ["
                                         << c_->result.message() << "]";
      absl::MutexLock lock(&TheSuite().mu);
      TheSuite().unexpected_passes.push_back(c_->folder + "/" + c_->name);
      return;
    }
    if (!c_->result.ok()) FAIL() << c_->result.ToString();
  }

 private:
  Case* c_;
};

// Counts results per folder and prints the summary lines.
class Summary : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& t) override {
    Counts& c = counts_[t.test_suite_name()];
    if (t.result()->Skipped()) c.skipped++;
    else if (t.result()->Failed()) c.failed++;
    else c.passed++;
  }
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    // KILN_CONFORMANCE_REPORT=file: one line per case (name, seconds, status).
    std::string report = GetEnvString("KILN_CONFORMANCE_REPORT", "");
    if (FILE* f = report.empty() ? nullptr : std::fopen(report.c_str(), "w")) {
      for (const auto& c : TheSuite().cases) {
        if (!c->ran) continue;
        std::fprintf(f, "%s/%s\t%.3f\t%s\n", c->folder.c_str(), c->name.c_str(), c->seconds,
                     c->result.ok() ? "OK" : c->result.ToString().c_str());
      }
      std::fclose(f);
    }
    for (const std::string& p : TheSuite().unexpected_passes)
      std::printf("conformance: known failure now passes: %s\n", p.c_str());
    for (const char* folder : kFolders) {
      const Counts& c = counts_[SuiteOf(folder)];
      std::string dev = GetEnvString("KILN_CONFORMANCE_DEVICE", "CPU");
      std::string label = dev == "CPU" ? folder : absl::StrCat(folder, " (", dev, ")");
      std::printf("conformance %s: %d passed, %d failed, %d skipped\n", label.c_str(), c.passed, c.failed,
                  c.skipped);
    }
    std::fflush(stdout);
  }

 private:
  struct Counts {
    int passed = 0, failed = 0, skipped = 0;
  };
  std::map<std::string, Counts> counts_;
};

// Finds a data file of this package (Bazel runfiles or the source tree).
std::string DataFile(const std::string& name) {
  std::string rel = "tests/conformance/" + name;
  for (const std::string& base : {std::string(""), GetEnvString("TEST_SRCDIR", "") + "/kiln/"}) {
    std::string p = base + rel;
    if (FILE* f = std::fopen(p.c_str(), "r")) {
      std::fclose(f);
      return p;
    }
  }
  return rel;
}

void Register(int* argc, char** argv) {
  Suite& suite = TheSuite();
  std::string root = GetEnvString("KILN_ONNX_TESTDATA", kDefaultRoot);
  if (!IsDir(root)) {
    ::testing::RegisterTest("conformance", "testdata", nullptr, nullptr, __FILE__, __LINE__,
                            [root]() -> ::testing::Test* {
                              struct Missing : ::testing::Test {
                                std::string r;
                                void TestBody() override {
                                  FAIL() << "libonnx-testdata is missing: " << r
                                         << " does not exist (tools/bootstrap installs the "
                                            "Debian package libonnx-testdata)";
                                }
                              };
                              auto* m = new Missing();
                              m->r = root;
                              return m;
                            });
    return;
  }
  for (auto [list, file] : {std::make_pair(&suite.skip, "skip_list.txt"),
                            std::make_pair(&suite.known, "known_failures.txt")}) {
    auto l = CaseList::Load(DataFile(file));
    if (!l.ok()) {
      std::fprintf(stderr, "conformance: cannot read %s: %s\n", file,
                   std::string(l.status().message()).c_str());
      std::exit(2);
    }
    *list = std::move(*l);
  }
  for (const char* folder : kFolders) {
    for (const std::string& name : SubDirs(root + "/" + folder)) {
      auto c = std::make_unique<Case>();
      c->folder = folder;
      c->name = name;
      c->dir = root + "/" + folder + "/" + name;
      c->skip = suite.skip.Find(folder, name);
      c->known = suite.known.Find(folder, name);
      Case* raw = c.get();
      suite.cases.push_back(std::move(c));
      ::testing::RegisterTest(SuiteOf(folder).c_str(), name.c_str(), nullptr, nullptr, __FILE__,
                              __LINE__, [raw]() -> ::testing::Test* { return new CaseTest(raw); });
    }
  }
  (void)argc, (void)argv;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  kiln::Suite& suite = kiln::TheSuite();
  suite.registry = kiln::DeviceRegistry::WithDefaults().release();
  suite.engine = new kiln::Engine(suite.registry);
  kiln::Register(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new kiln::PreRun());
  ::testing::UnitTest::GetInstance()->listeners().Append(new kiln::Summary());
  return RUN_ALL_TESTS();
}
