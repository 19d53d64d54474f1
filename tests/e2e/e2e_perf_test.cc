// End to end (issue 14.3): the `kiln` CLI's perf command against a real
// kilnd serving `simple`, over gRPC and over HTTP/REST (binary tensor
// data, statistics over the same protocol), with --export-json and
// --export-csv; plus its usage and server errors. Then --shared-memory
// system over both protocols against a kilnd with --shm-allow (nothing
// left registered or in /dev/shm afterwards, SIGINT included), and against
// one without it (a clear error naming the flag).
#include <dirent.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kKilnd[] = "server/kilnd";
constexpr char kKiln[] = "clients/kiln";

std::string Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Splits simple CSV (no quoted fields expected in these rows) into a map
// per data row, keyed by the header's column names.
std::vector<std::map<std::string, std::string>> ParseCsv(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  std::vector<std::map<std::string, std::string>> rows;
  if (lines.empty()) return rows;
  std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    EXPECT_EQ(cells.size(), header.size()) << lines[i];
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < header.size() && k < cells.size(); ++k) row[header[k]] = cells[k];
    rows.push_back(row);
  }
  return rows;
}

// The objects in /dev/shm whose name starts with kiln_perf.
std::set<std::string> PerfShmObjects() {
  std::set<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (absl::StartsWith(e->d_name, "kiln_perf")) out.insert(e->d_name);
    closedir(d);
  }
  return out;
}

// Objects in `after` that were not in `before`.
std::vector<std::string> NewObjects(const std::set<std::string>& before,
                                    const std::set<std::string>& after) {
  std::vector<std::string> out;
  for (const std::string& o : after)
    if (!before.count(o)) out.push_back(o);
  return out;
}

class E2ePerfTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto repo = MakeRepo("perf_repo", {});
    ASSERT_TRUE(repo.ok()) << repo.status();
    auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + *repo, "--exit-timeout=5"});
    ASSERT_TRUE(p.ok()) << p.status();
    kilnd_ = p->release();
    ASSERT_GT(kilnd_->http_port(), 0);
  }
  static void TearDownTestSuite() {
    if (kilnd_) {
      kilnd_->Signal(SIGTERM);
      auto code = kilnd_->Wait(absl::Seconds(30));
      EXPECT_TRUE(code.ok() && *code == 0) << "kilnd did not exit cleanly";
      delete kilnd_;
      kilnd_ = nullptr;
    }
  }

  // Runs `kiln --url=URL perf ARGS` with stdout / stderr in files under
  // `name`; returns the exit status.
  int Perf(const std::string& name, const std::string& url, const std::string& args) {
    dir_ = TempDir("perf_" + name);
    int rc = Shell(absl::StrCat(kKiln, " --url=", url, " --timeout=60 perf --model=simple ",
                                args, " >", dir_, "/out.txt 2>", dir_, "/err.txt"));
    out_ = Read(dir_ + "/out.txt");
    err_ = Read(dir_ + "/err.txt");
    return rc;
  }

  // One short level at concurrency 2 with both exports (`extra` flags
  // added); checks them.
  void RunAndCheckExports(const std::string& protocol, const std::string& url,
                          const std::string& extra = "") {
    const std::string name = protocol + (extra.empty() ? "" : "_shm");
    ASSERT_EQ(Perf(name, url,
                   absl::StrCat("--protocol=", protocol,
                                " --concurrency=2 --window-ms=200 --max-windows=3"
                                " --export-json=", TempDir("perf_" + name), "/perf.json",
                                " --export-csv=", TempDir("perf_" + name), "/perf.csv ", extra)),
              0)
        << out_ << err_;
    EXPECT_THAT(out_, HasSubstr("concurrency 2:"));
    nlohmann::json j = nlohmann::json::parse(Read(dir_ + "/perf.json"), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << Read(dir_ + "/perf.json");
    EXPECT_EQ(j["format"], "kiln-perf/1");
    EXPECT_EQ(j["settings"]["model"], "simple");
    EXPECT_EQ(j["settings"]["protocol"], protocol);
    EXPECT_EQ(j["settings"]["url"], url);
    EXPECT_EQ(j["settings"]["shapes"]["INPUT0"], nlohmann::json::array({1, 16}));
    EXPECT_EQ(j["settings"]["window_ms"], 200);
    ASSERT_EQ(j["levels"].size(), 1u);
    const nlohmann::json& l = j["levels"][0];
    EXPECT_EQ(l["concurrency"], 2);
    EXPECT_GT(l["requests"].get<int64_t>(), 0);
    EXPECT_EQ(l["errors"].get<int64_t>(), 0) << l["first_error"];
    EXPECT_GT(l["throughput_infer_per_sec"].get<double>(), 0);
    EXPECT_GT(l["latency_p50_ms"].get<double>(), 0);
    EXPECT_LE(l["latency_p50_ms"].get<double>(), l["latency_p95_ms"].get<double>());
    // The server-side breakdown came through the same protocol.
    EXPECT_GT(l["server_request_us"].get<double>(), 0);
    EXPECT_GT(l["server_compute_infer_us"].get<double>(), 0);
    EXPECT_GE(l["server_avg_batch"].get<double>(), 1);

    auto rows = ParseCsv(Read(dir_ + "/perf.csv"));
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0]["model"], "simple");
    EXPECT_EQ(rows[0]["protocol"], protocol);
    EXPECT_EQ(rows[0]["concurrency"], "2");
    int64_t requests = 0, errors = -1;
    ASSERT_TRUE(absl::SimpleAtoi(rows[0]["requests"], &requests));
    ASSERT_TRUE(absl::SimpleAtoi(rows[0]["errors"], &errors));
    EXPECT_EQ(requests, l["requests"].get<int64_t>());
    EXPECT_EQ(errors, 0);
    double p99 = 0;
    ASSERT_TRUE(absl::SimpleAtod(rows[0]["latency_p99_ms"], &p99));
    EXPECT_GT(p99, 0);
  }

  std::string HttpUrl() const { return absl::StrCat("127.0.0.1:", kilnd_->http_port()); }
  std::string GrpcUrl() const { return absl::StrCat("127.0.0.1:", kilnd_->grpc_port()); }

  static KilnProcess* kilnd_;
  std::string dir_, out_, err_;
};
KilnProcess* E2ePerfTest::kilnd_ = nullptr;

// The same, against a kilnd that allows perf's shared-memory keys (its own
// kilnd_: gtest runs one suite's tests between its set-up and tear-down).
class E2ePerfShmTest : public E2ePerfTest {
 protected:
  static void SetUpTestSuite() {
    auto repo = MakeRepo("perf_shm_repo", {});
    ASSERT_TRUE(repo.ok()) << repo.status();
    auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + *repo, "--exit-timeout=5",
                                         "--shm-allow=/kiln_perf"});
    ASSERT_TRUE(p.ok()) << p.status();
    kilnd_ = p->release();
  }

  void SetUp() override { before_ = PerfShmObjects(); }
  // Nothing perf made is left: no object in /dev/shm, no region in kilnd.
  void ExpectNothingLeft() {
    EXPECT_THAT(NewObjects(before_, PerfShmObjects()), ::testing::IsEmpty());
    auto status = kilnd_->Client()->SystemSharedMemoryStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(status->regions_size(), 0);
  }

  std::set<std::string> before_;
};

TEST_F(E2ePerfShmTest, GrpcWithSharedMemory) {
  RunAndCheckExports("grpc", GrpcUrl(), "--shared-memory=system");
  // simple's outputs are [-1, 16] FP32: sizes from the metadata.
  EXPECT_THAT(out_, HasSubstr("shared memory: system, one 256-byte region per worker "
                              "(2 inputs, 2 outputs)"));
  ExpectNothingLeft();
}

TEST_F(E2ePerfShmTest, HttpWithSharedMemory) {
  RunAndCheckExports("http", HttpUrl(), "--shared-memory=system");
  EXPECT_THAT(out_, HasSubstr("shared memory: system"));
  ExpectNothingLeft();
}

TEST_F(E2ePerfShmTest, OutputSizeOverride) {
  EXPECT_EQ(Perf("override", HttpUrl(),
                 "--protocol=http --shared-memory=system --output-shared-memory-size=1000 "
                 "--concurrency=1 --window-ms=100 --max-windows=3"),
            0)
      << out_ << err_;
  // INPUT0 0..64, INPUT1 64..128, OUTPUT0 128..1128, OUTPUT1 1152..2152.
  EXPECT_THAT(out_, HasSubstr("one 2152-byte region per worker"));
  EXPECT_THAT(out_, HasSubstr(" 0 errors"));
  ExpectNothingLeft();
}

TEST_F(E2ePerfShmTest, SigintRemovesTheRegions) {
  dir_ = TempDir("perf_sigint");
  for (const char* protocol : {"grpc", "http"}) {
    SCOPED_TRACE(protocol);
    const std::string url = std::string(protocol) == "grpc" ? GrpcUrl() : HttpUrl();
    // A run of up to 50 s, interrupted after 2 s (the workers are running).
    int rc = Shell(absl::StrCat("timeout --preserve-status -s INT 2 ", kKiln, " --url=", url,
                                " perf --model=simple --protocol=", protocol,
                                " --shared-memory=system --concurrency=2 --window-ms=1000"
                                " --max-windows=50 >",
                                dir_, "/out.txt 2>", dir_, "/err.txt"));
    err_ = Read(dir_ + "/err.txt");
    EXPECT_EQ(rc, 128 + SIGINT) << err_;
    EXPECT_THAT(err_, HasSubstr("interrupted"));
    EXPECT_THAT(err_, HasSubstr("removed 2 shared-memory region(s)"));
    ExpectNothingLeft();
  }
}

TEST_F(E2ePerfTest, HttpWithExports) { RunAndCheckExports("http", HttpUrl()); }

TEST_F(E2ePerfTest, GrpcWithExports) { RunAndCheckExports("grpc", GrpcUrl()); }

TEST_F(E2ePerfTest, HttpUrlWithScheme) {
  EXPECT_EQ(Perf("scheme", "http://" + HttpUrl() + "/",
                 "--protocol=http --concurrency=1 --window-ms=100 --max-windows=3"),
            0)
      << out_ << err_;
  EXPECT_THAT(out_, HasSubstr("0 errors"));
}

TEST_F(E2ePerfTest, UsageErrors) {
  EXPECT_EQ(Perf("usage", GrpcUrl(), "--protocol=bogus"), 2);
  EXPECT_THAT(err_, HasSubstr("--protocol: 'bogus' (use grpc or http)"));
  // The export path is checked before the run: no level is measured.
  EXPECT_EQ(Perf("usage", HttpUrl(), "--protocol=http --export-json=/nonexistent-kiln/x.json"), 2);
  EXPECT_THAT(err_, HasSubstr("/nonexistent-kiln/x.json"));
  EXPECT_THAT(out_, ::testing::Not(HasSubstr("concurrency")));
  // --protocol belongs to perf.
  int rc = Shell(absl::StrCat(kKiln, " --url=", GrpcUrl(), " --protocol=http health >/dev/null 2>&1"));
  EXPECT_EQ(rc, 2);
}

TEST_F(E2ePerfTest, SharedMemoryNeedsShmAllow) {
  const std::set<std::string> before = PerfShmObjects();
  for (const char* protocol : {"grpc", "http"}) {
    SCOPED_TRACE(protocol);
    const std::string url = std::string(protocol) == "grpc" ? GrpcUrl() : HttpUrl();
    EXPECT_EQ(Perf("noshm", url,
                   absl::StrCat("--protocol=", protocol, " --shared-memory=system")),
              1);
    EXPECT_THAT(err_, HasSubstr("--shared-memory system: registering region"));
    EXPECT_THAT(err_, HasSubstr("system shared memory is disabled: start kilnd with --shm-allow"));
    EXPECT_THAT(out_, ::testing::Not(HasSubstr("concurrency")));  // nothing measured
  }
  EXPECT_THAT(NewObjects(before, PerfShmObjects()), ::testing::IsEmpty());
}

TEST_F(E2ePerfTest, ServerErrorsCarryTheServersMessage) {
  // An unknown model: 404 with kilnd's JSON error, exit 1.
  dir_ = TempDir("perf_missing");
  int rc = Shell(absl::StrCat(kKiln, " --url=", HttpUrl(), " perf --protocol=http --model=nope",
                              " >", dir_, "/out.txt 2>", dir_, "/err.txt"));
  err_ = Read(dir_ + "/err.txt");
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(err_, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(err_, HasSubstr("HTTP 404"));
  EXPECT_THAT(err_, HasSubstr("nope"));
  // Nothing listens on the gRPC port over HTTP: a connection error, exit 1.
  EXPECT_EQ(Perf("wrong_port", "127.0.0.1:1", "--protocol=http"), 1);
  EXPECT_THAT(err_, HasSubstr("UNAVAILABLE"));
}

}  // namespace
}  // namespace kiln::e2e
