// End to end: kiln's metrics exposition passes `promtool check metrics`,
// and a real Prometheus server (Debian package prometheus) scraping kilnd
// sees kiln_estimated_flops_total grow through its HTTP query API.
#include <signal.h>

#include <fstream>

#include "absl/strings/numbers.h"
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
double QueryValue(const PrometheusProcess& prom, const std::string& query) {
  auto body = prom.Query(query);
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
  auto prom = PrometheusProcess::Start("prometheus", (*p)->metrics_port());
  ASSERT_TRUE(prom.ok()) << prom.status();
  auto client = (*p)->Client();
  const std::string query = "sum(kiln_estimated_flops_total{job=\"kilnd\",model=\"simple\"})";
  Infer(client.get(), 20);
  double first = -1;
  for (absl::Time end = absl::Now() + absl::Seconds(90); first <= 0 && absl::Now() < end;) {
    first = QueryValue(**prom, query);
    if (first <= 0) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_GT(first, 0) << "prometheus never saw kiln's FLOP counter";
  Infer(client.get(), 50);
  double later = first;
  for (absl::Time end = absl::Now() + absl::Seconds(90); later <= first && absl::Now() < end;) {
    later = QueryValue(**prom, query);
    if (later <= first) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_GT(later, first) << "the FLOP counter did not grow in prometheus";
  double rate = QueryValue(**prom, "sum(kiln_inferences_total{job=\"kilnd\"})");
  EXPECT_GE(rate, 70 * 2);
  prom->reset();
  (*p)->Signal(SIGTERM);
  EXPECT_EQ(*(*p)->Wait(absl::Seconds(30)), 0);
}

}  // namespace
}  // namespace kiln::e2e
