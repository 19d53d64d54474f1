// kilnd's metrics endpoint (issue 13.8): half-sent HTTP requests do not hold
// back scrapes, --metrics-address binds it apart from the gRPC address, and
// --metrics-auth-token-file puts it behind a bearer token.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/http_get.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kKilnd[] = "server/kilnd";

std::string Repo() {
  auto repo = MakeRepo("metrics_repo", {});
  EXPECT_TRUE(repo.ok()) << repo.status();
  return repo.ok() ? *repo : "";
}

TEST(E2eMetricsTest, HalfSentRequestsDoNotBlockScrapes) {
  auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + Repo()});
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<std::unique_ptr<testing::HalfSentRequest>> slow;
  for (int i = 0; i < 2; ++i) {
    slow.push_back(std::make_unique<testing::HalfSentRequest>((*p)->metrics_port()));
    ASSERT_TRUE(slow.back()->connected());
  }
  absl::SleepFor(absl::Milliseconds(200));
  absl::Time start = absl::Now();
  auto text = testing::HttpGet((*p)->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("kiln_model_ready"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(E2eMetricsTest, MetricsAddress) {
  auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + Repo(),
                                       "--metrics-address=127.0.0.2"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(*(*p)->Client()->ServerLive());  // gRPC stays on 127.0.0.1
  auto text = testing::HttpGet("127.0.0.2", (*p)->metrics_port(), "/metrics", "");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("kiln_model_ready"));
  EXPECT_FALSE(testing::HttpGet("127.0.0.1", (*p)->metrics_port(), "/metrics", "").ok());
}

TEST(E2eMetricsTest, BearerAuth) {
  std::string token = TempDir("metrics_token") + "/token";
  std::ofstream(token) << "m3trics\n";
  auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + Repo(),
                                       "--metrics-auth-token-file=" + token});
  ASSERT_TRUE(p.ok()) << p.status();
  int port = (*p)->metrics_port();
  EXPECT_THAT(testing::HttpGet(port, "/metrics").status().message(), HasSubstr("401"));
  auto wrong = testing::HttpGet("127.0.0.1", port, "/metrics", "Authorization: Bearer x\r\n");
  EXPECT_THAT(wrong.status().message(), HasSubstr("401"));
  auto text = testing::HttpGet("127.0.0.1", port, "/metrics", "Authorization: Bearer m3trics\r\n");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("kiln_model_ready"));
  EXPECT_TRUE(*(*p)->Client()->ServerLive());  // gRPC auth is separate (off here)
}

}  // namespace
}  // namespace kiln::e2e
