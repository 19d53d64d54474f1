// End to end: kiln's metrics exposition passes `promtool check metrics`,
// and a real Prometheus server (Debian package prometheus) scraping kilnd
// sees kiln_estimated_flops_total grow through its HTTP query API.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/http_get.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using ::testing::HasSubstr;

void Infer(KilnClient* c, int n) {
  std::vector<float> a(32, 1.5f), b(32, 2.0f);
  std::vector<ClientTensor> in = {FloatTensor("INPUT0", a, {2, 16}),
                                  FloatTensor("INPUT1", b, {2, 16})};
  for (int i = 0; i < n; ++i) ASSERT_TRUE(c->Infer("simple", in).ok());
}

// The value of the first sample of an instant-query answer, or -1.
double QueryValue(int port, const std::string& query) {
  std::string q;
  for (char ch : query) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') q += ch;
    else q += absl::StrFormat("%%%02X", static_cast<unsigned char>(ch));
  }
  auto body = testing::HttpGet(port, "/api/v1/query?query=" + q);
  if (!body.ok()) return -1;
  // ..."value":[1700000000.123,"96"]...
  size_t v = body->find("\"value\":[");
  if (v == std::string::npos) return -1;
  size_t open = body->find('"', body->find(',', v));
  size_t close = body->find('"', open + 1);
  double d;
  if (!absl::SimpleAtod(body->substr(open + 1, close - open - 1), &d)) return -1;
  return d;
}

TEST(E2ePrometheusTest, PromtoolAcceptsTheExposition) {
  auto repo = MakeRepo("promtool_repo", {});
  ASSERT_TRUE(repo.ok());
  auto p = KilnProcess::Start("server/kilnd", {"--model-repository=" + *repo});
  ASSERT_TRUE(p.ok()) << p.status();
  Infer((*p)->Client().get(), 3);
  auto text = testing::HttpGet((*p)->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  for (const char* name :
       {"kiln_inference_requests_success_total", "kiln_inferences_total", "kiln_executions_total",
        "kiln_request_duration_seconds_bucket", "kiln_queue_duration_seconds_bucket",
        "kiln_compute_infer_duration_seconds_bucket", "kiln_batch_size_bucket",
        "kiln_pending_requests", "kiln_model_load_duration_seconds", "kiln_jit_captures_total",
        "kiln_jit_hits_total", "kiln_jit_misses_total", "kiln_jit_capture_seconds_total",
        "kiln_kernels_compiled_total", "kiln_estimated_flops_total", "kiln_estimated_bytes_total",
        "kiln_achieved_flops_per_second", "kiln_device_memory_allocated_bytes",
        "kiln_device_memory_cached_bytes"})
    EXPECT_THAT(*text, HasSubstr(name));
  std::string file = TempDir("promtool") + "/metrics.txt";
  std::ofstream(file) << *text;
  std::string out = file + ".out";
  int rc = Shell("promtool check metrics < " + file + " > " + out + " 2>&1");
  std::ifstream f(out);
  std::string report((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << "promtool check metrics:\n" << report;
  (*p)->Signal(SIGTERM);
  EXPECT_EQ(*(*p)->Wait(absl::Seconds(30)), 0);
}

TEST(E2ePrometheusTest, PrometheusSeesFlopCountersGrow) {
  auto repo = MakeRepo("prom_repo", {});
  ASSERT_TRUE(repo.ok());
  auto p = KilnProcess::Start("server/kilnd", {"--model-repository=" + *repo});
  ASSERT_TRUE(p.ok()) << p.status();
  std::string dir = TempDir("prometheus");
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "scrape_configs:\n  - job_name: kilnd\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << (*p)->metrics_port() << "']\n";
  int web = FreePort();
  // Prepared before fork: only async-signal-safe calls in the child.
  std::string log = dir + "/prometheus.log";
  std::string config = "--config.file=" + dir + "/prometheus.yml";
  std::string storage = "--storage.tsdb.path=" + dir + "/data";
  std::string listen = absl::StrCat("--web.listen-address=127.0.0.1:", web);
  pid_t prom = ::fork();
  ASSERT_GE(prom, 0);
  if (prom == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execl("/usr/bin/prometheus", "prometheus", config.c_str(), storage.c_str(),
            listen.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  auto stop_prometheus = [&] {
    ::kill(prom, SIGTERM);
    int status;
    ::waitpid(prom, &status, 0);
  };
  bool ready = false;
  for (int i = 0; i < 300 && !ready; ++i) {
    ready = testing::HttpGet(web, "/-/ready").ok();
    if (!ready) absl::SleepFor(absl::Milliseconds(100));
  }
  if (!ready) {
    stop_prometheus();
    FAIL() << "prometheus did not start (see " << dir << "/prometheus.log)";
  }
  auto client = (*p)->Client();
  const std::string query = "sum(kiln_estimated_flops_total{job=\"kilnd\",model=\"simple\"})";
  Infer(client.get(), 20);
  double first = -1;
  for (int i = 0; i < 150 && first <= 0; ++i) {
    first = QueryValue(web, query);
    if (first <= 0) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_GT(first, 0) << "prometheus never saw kiln's FLOP counter";
  Infer(client.get(), 50);
  double later = first;
  for (int i = 0; i < 150 && later <= first; ++i) {
    later = QueryValue(web, query);
    if (later <= first) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_GT(later, first) << "the FLOP counter did not grow in prometheus";
  double rate = QueryValue(web, "sum(kiln_inferences_total{job=\"kilnd\"})");
  EXPECT_GE(rate, 70 * 2);
  stop_prometheus();
  (*p)->Signal(SIGTERM);
  EXPECT_EQ(*(*p)->Wait(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kiln::e2e
