// perf_export: golden JSON and CSV of a fixed run, CSV quoting, atomic
// writes and the early path check.
#include "clients/perf_export.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

PerfRunInfo Info(const std::string& model = "simple") {
  PerfRunInfo info;
  info.model = model;
  info.version = "1";
  info.protocol = "http";
  info.url = "localhost:8000";
  info.batch = 2;
  info.shapes = {{"INPUT0", {2, 16}}, {"INPUT1", {2, 16}}};
  info.window_ms = 500;
  info.stability = 0.1;
  info.stable_windows = 3;
  info.max_windows = 10;
  info.concurrency = {1, 4};
  return info;
}

std::vector<PerfLevel> Levels() {
  PerfLevel a;
  a.concurrency = 1;
  a.throughput = 1234.5678;
  a.avg_ms = 0.81234;
  a.p50_ms = 0.8;
  a.p90_ms = 0.9;
  a.p95_ms = 0.95;
  a.p99_ms = 1.23456;
  a.requests = 3704;
  a.stable = true;
  a.windows = 3;
  a.server_request_us = 512.3456;
  a.server_queue_us = 10.5;
  a.server_input_us = 20.25;
  a.server_infer_us = 400.125;
  a.server_output_us = 5;
  a.server_avg_batch = 1;
  PerfLevel b;
  b.concurrency = 4;
  b.throughput = 2000;
  b.avg_ms = 2;
  b.p50_ms = 1.99994;
  b.p90_ms = 0.00004;  // below the 4th decimal: 0
  b.p95_ms = 3.00006;
  b.p99_ms = 4;
  b.requests = 6000;
  b.errors = 2;
  b.first_error = "UNAVAILABLE: queue \"full\", retry";
  b.windows = 10;
  b.server_avg_batch = 10.0 / 3;
  return {a, b};
}

constexpr char kGoldenJson[] = R"({
  "format": "kiln-perf/1",
  "settings": {
    "model": "simple",
    "model_version": "1",
    "protocol": "http",
    "url": "localhost:8000",
    "shared_memory": "none",
    "batch": 2,
    "shapes": {
      "INPUT0": [
        2,
        16
      ],
      "INPUT1": [
        2,
        16
      ]
    },
    "window_ms": 500,
    "stability": 0.1,
    "stable_windows": 3,
    "max_windows": 10,
    "concurrency": [
      1,
      4
    ]
  },
  "levels": [
    {
      "concurrency": 1,
      "throughput_infer_per_sec": 1234.568,
      "latency_avg_ms": 0.8123,
      "latency_p50_ms": 0.8,
      "latency_p90_ms": 0.9,
      "latency_p95_ms": 0.95,
      "latency_p99_ms": 1.2346,
      "requests": 3704,
      "errors": 0,
      "first_error": "",
      "stable": true,
      "windows": 3,
      "server_request_us": 512.346,
      "server_queue_us": 10.5,
      "server_compute_input_us": 20.25,
      "server_compute_infer_us": 400.125,
      "server_compute_output_us": 5.0,
      "server_avg_batch": 1.0
    },
    {
      "concurrency": 4,
      "throughput_infer_per_sec": 2000.0,
      "latency_avg_ms": 2.0,
      "latency_p50_ms": 1.9999,
      "latency_p90_ms": 0.0,
      "latency_p95_ms": 3.0001,
      "latency_p99_ms": 4.0,
      "requests": 6000,
      "errors": 2,
      "first_error": "UNAVAILABLE: queue \"full\", retry",
      "stable": false,
      "windows": 10,
      "server_request_us": 0.0,
      "server_queue_us": 0.0,
      "server_compute_input_us": 0.0,
      "server_compute_infer_us": 0.0,
      "server_compute_output_us": 0.0,
      "server_avg_batch": 3.333
    }
  ]
}
)";

constexpr char kGoldenCsv[] =
    "model,protocol,concurrency,throughput_infer_per_sec,latency_avg_ms,latency_p50_ms,"
    "latency_p90_ms,latency_p95_ms,latency_p99_ms,requests,errors,stable,windows,"
    "server_request_us,server_queue_us,server_compute_input_us,server_compute_infer_us,"
    "server_compute_output_us,server_avg_batch,first_error\n"
    "simple,http,1,1234.568,0.8123,0.8000,0.9000,0.9500,1.2346,3704,0,true,3,512.346,10.500,"
    "20.250,400.125,5.000,1.000,\n"
    "simple,http,4,2000.000,2.0000,1.9999,0.0000,3.0001,4.0000,6000,2,false,10,0.000,0.000,"
    "0.000,0.000,0.000,3.333,\"UNAVAILABLE: queue \"\"full\"\", retry\"\n";

TEST(PerfExportTest, GoldenJson) {
  std::string json = PerfJson(Info(), Levels());
  EXPECT_EQ(json, kGoldenJson);
  nlohmann::json j = nlohmann::json::parse(json);
  EXPECT_EQ(j["levels"][1]["first_error"], "UNAVAILABLE: queue \"full\", retry");
}

TEST(PerfExportTest, GoldenCsv) { EXPECT_EQ(PerfCsv(Info(), Levels()), kGoldenCsv); }

TEST(PerfExportTest, CsvQuotesAModelNameWithAComma) {
  std::string csv = PerfCsv(Info("det,v2"), {Levels()[0]});
  EXPECT_THAT(csv, HasSubstr("\n\"det,v2\",http,1,1234.568,"));
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField("a\"b"), "\"a\"\"b\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
}

TEST(PerfExportTest, NoLevelsIsAHeaderAndAnEmptyList) {
  EXPECT_EQ(PerfCsv(Info(), {}).find('\n'), PerfCsv(Info(), {}).size() - 1);
  EXPECT_EQ(nlohmann::json::parse(PerfJson(Info(), {}))["levels"].size(), 0u);
}

std::string TestDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

int FilesIn(const std::string& dir) {
  int n = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (dirent* e = ::readdir(d))
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
  ::closedir(d);
  return n;
}

TEST(PerfExportTest, WritesAtomicallyAndReplaces) {
  std::string dir = TestDir("export_atomic");
  std::string path = dir + "/perf.json";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second\n").ok());
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), "second\n");
  EXPECT_EQ(FilesIn(dir), 1) << "a temporary file was left behind";
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(PerfExportTest, BadPathsFailTheCheck) {
  std::string dir = TestDir("export_check");
  absl::Status s = CheckExportPath(dir + "/no/such/dir/perf.csv");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no/such/dir/perf.csv"));
  EXPECT_THAT(s.message(), HasSubstr("No such file or directory"));
  EXPECT_THAT(CheckExportPath(dir).message(), HasSubstr("is a directory"));
  EXPECT_EQ(CheckExportPath("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckExportPath(dir + "/ok.json").ok());
  EXPECT_EQ(FilesIn(dir), 0) << "the check left a file behind";
  EXPECT_FALSE(WriteFileAtomically(dir + "/no/such/x", "x").ok());
}

}  // namespace
}  // namespace kiln
