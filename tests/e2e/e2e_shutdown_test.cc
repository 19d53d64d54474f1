// End to end: SIGTERM drains in-flight requests. Requests sit in a batcher
// queue with a long batching window when kilnd gets SIGTERM; every one of
// them must still be answered correctly, and kilnd must exit 0 promptly.
#include <signal.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/testing/http_get.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

constexpr char kSlow[] = R"pb(
  max_batch_size: 8
  input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
          { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
  output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
           { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
  dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 600000000 }
)pb";

TEST(E2eShutdownTest, SigtermDrainsInFlightRequests) {
  auto repo = MakeRepo("shutdown_repo", {{"slow", kSlow}});
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto p = KilnProcess::Start("server/kilnd",
                              {"--model-repository=" + *repo, "--exit-timeout=20"});
  ASSERT_TRUE(p.ok()) << p.status();
  constexpr int kInFlight = 5;
  std::vector<absl::StatusOr<std::vector<ClientTensor>>> results(kInFlight);
  std::vector<std::vector<ClientTensor>> inputs(kInFlight);
  std::vector<std::thread> threads;
  for (int i = 0; i < kInFlight; ++i) {
    std::vector<float> a(16), b(16);
    for (int k = 0; k < 16; ++k) {
      a[k] = static_cast<float>(i * 100 + k);
      b[k] = static_cast<float>(k % 3) - 1;
    }
    inputs[i] = {FloatTensor("INPUT0", a, {1, 16}), FloatTensor("INPUT1", b, {1, 16})};
    threads.emplace_back([&, i] { results[i] = (*p)->Client()->Infer("slow", inputs[i]); });
  }
  // Wait until all of them wait in the queue (30 s batching window).
  const std::string kQueued =
      absl::StrCat("kiln_pending_requests{model=\"slow\",version=\"1\"} ", kInFlight);
  bool queued = false;
  for (absl::Time deadline = absl::Now() + absl::Seconds(60); !queued && absl::Now() < deadline;) {
    queued = testing::HttpGet((*p)->metrics_port(), "/metrics").value_or("").find(kQueued) !=
             std::string::npos;
    if (!queued) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(queued);
  (*p)->Signal(SIGTERM);
  for (auto& t : threads) t.join();
  auto code = (*p)->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  for (int i = 0; i < kInFlight; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    std::vector<float> a = Floats(inputs[i][0]), b = Floats(inputs[i][1]);
    std::vector<float> sum = Floats((*results[i])[0]);
    ASSERT_EQ(sum.size(), 16u);
    for (int k = 0; k < 16; ++k) EXPECT_EQ(sum[k], a[k] + b[k]);
  }
  // Gone: new calls fail.
  ClientOptions o;
  o.address = (*p)->address();
  o.timeout = absl::Seconds(2);
  EXPECT_FALSE((*KilnClient::Connect(o))->ServerLive().ok());
}

}  // namespace
}  // namespace kiln::e2e
