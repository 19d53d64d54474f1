// The /metrics endpoint: serves a registry, slow clients do not hold back
// scrapes (issue 13.8: two half-sent requests blocked every scrape for
// ~30 s), optional bearer auth, bind address and bind errors.
#include "server/metrics_http.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "server/testing/http_get.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<prometheus::Registry> Registry() {
  auto r = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter().Name("kiln_test_total").Help("test").Register(*r).Add({}).Increment(3);
  return r;
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartServer(
    const std::shared_ptr<prometheus::Registry>& registry, MetricsHttpOptions o = {}) {
  o.address = "127.0.0.1";
  o.port = 0;
  return MetricsHttpServer::Start(o, {registry});
}

// Seconds one scrape takes; -1 when it fails.
double TimedScrape(int port) {
  absl::Time start = absl::Now();
  auto text = testing::HttpGet(port, "/metrics");
  if (!text.ok() || text->find("kiln_test_total 3") == std::string::npos) return -1;
  return absl::ToDoubleSeconds(absl::Now() - start);
}

TEST(MetricsHttpTest, ServesTheRegistry) {
  auto registry = Registry();
  auto server = StartServer(registry);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  auto text = testing::HttpGet((*server)->port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("# TYPE kiln_test_total counter"));
  EXPECT_THAT(*text, HasSubstr("kiln_test_total 3"));
  EXPECT_THAT(testing::HttpGet((*server)->port(), "/other").status().message(),
              HasSubstr("404"));
}

TEST(MetricsHttpTest, HalfSentRequestsDoNotBlockScrapes) {
  auto registry = Registry();
  auto server = StartServer(registry);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::unique_ptr<testing::HalfSentRequest>> slow;
  for (int i = 0; i < 2; ++i) {
    slow.push_back(std::make_unique<testing::HalfSentRequest>((*server)->port()));
    ASSERT_TRUE(slow.back()->connected());
  }
  absl::SleepFor(absl::Milliseconds(200));  // the workers have taken them
  double seconds = TimedScrape((*server)->port());
  EXPECT_GE(seconds, 0) << "the scrape failed";
  EXPECT_LT(seconds, 2);
}

TEST(MetricsHttpTest, MoreSlowClientsThanWorkersWaitAtMostTheTimeout) {
  auto registry = Registry();
  MetricsHttpOptions o;
  o.num_threads = 2;
  o.request_timeout = absl::Seconds(1);
  auto server = StartServer(registry, o);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::unique_ptr<testing::HalfSentRequest>> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(std::make_unique<testing::HalfSentRequest>((*server)->port()));
    ASSERT_TRUE(slow.back()->connected());
  }
  absl::SleepFor(absl::Milliseconds(200));
  double seconds = TimedScrape((*server)->port());
  EXPECT_GE(seconds, 0) << "the scrape failed";
  EXPECT_LT(seconds, 4);  // two rounds of timeouts at most
}

TEST(MetricsHttpTest, BearerAuth) {
  auto registry = Registry();
  MetricsHttpOptions o;
  o.auth_token = "s3cret";
  auto server = StartServer(registry, o);
  ASSERT_TRUE(server.ok()) << server.status();
  int port = (*server)->port();
  EXPECT_THAT(testing::HttpGet(port, "/metrics").status().message(), HasSubstr("401"));
  EXPECT_THAT(testing::HttpGet("127.0.0.1", port, "/metrics", "Authorization: Bearer nope\r\n")
                  .status()
                  .message(),
              HasSubstr("401"));
  EXPECT_THAT(testing::HttpGet("127.0.0.1", port, "/metrics", "Authorization: Basic s3cret\r\n")
                  .status()
                  .message(),
              HasSubstr("401"));
  auto text = testing::HttpGet("127.0.0.1", port, "/metrics", "Authorization: Bearer s3cret\r\n");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("kiln_test_total 3"));
}

TEST(MetricsHttpTest, BindsTheGivenAddress) {
  auto registry = Registry();
  MetricsHttpOptions o;
  o.address = "127.0.0.2";
  o.port = 0;
  auto server = MetricsHttpServer::Start(o, {registry});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(testing::HttpGet("127.0.0.2", (*server)->port(), "/metrics", "").ok());
  EXPECT_FALSE(testing::HttpGet("127.0.0.1", (*server)->port(), "/metrics", "").ok());
}

TEST(MetricsHttpTest, APortInUseIsAnError) {
  auto registry = Registry();
  auto first = StartServer(registry);
  ASSERT_TRUE(first.ok()) << first.status();
  MetricsHttpOptions o;
  o.address = "127.0.0.1";
  o.port = (*first)->port();
  auto second = MetricsHttpServer::Start(o, {registry});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kiln
