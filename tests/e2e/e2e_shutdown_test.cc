// End to end: SIGTERM drains in-flight requests. Requests sit in a batcher
// queue with a long batching window when kilnd gets SIGTERM; every one of
// them must still be answered correctly, and kilnd must exit 0 promptly.
#include <signal.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/testing/http_get.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

const std::string kSlow = SimpleBatchedConfig(600000000, true);

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

const std::string kBatched = SimpleBatchedConfig(20000, true);

// SIGTERM while clients keep requests in flight, each on its own channel:
// every request is answered correctly or refused as UNAVAILABLE (the
// server is going away); none fails otherwise (no INTERNAL "RST_STREAM",
// no CANCELLED), and kilnd exits 0.
TEST(E2eShutdownTest, SigtermUnderLoadAnswersOrRefusesEveryRequest) {
  auto repo = MakeRepo("shutdown_load_repo", {{"batched", kBatched}});
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto p = KilnProcess::Start("server/kilnd",
                              {"--model-repository=" + *repo, "--exit-timeout=20"});
  ASSERT_TRUE(p.ok()) << p.status();
  constexpr int kClients = 6;
  std::atomic<int> answered{0};
  std::atomic<bool> stop{false};
  struct Outcome {
    int ok = 0, unavailable = 0, wrong = 0;
    std::vector<std::string> other;
  };
  std::vector<Outcome> out(kClients);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::unique_ptr<KilnClient> client = (*p)->Client("", absl::Seconds(60));
      for (int i = 0; !stop.load(); ++i) {
        std::vector<float> a(16), b(16);
        for (int k = 0; k < 16; ++k) {
          a[k] = static_cast<float>(c * 1000 + i % 1000);
          b[k] = static_cast<float>(k);
        }
        auto r = client->Infer("batched", {FloatTensor("INPUT0", a, {1, 16}),
                                           FloatTensor("INPUT1", b, {1, 16})});
        if (r.ok()) {
          std::vector<float> sum = Floats((*r)[0]);
          bool right = sum.size() == 16;
          for (int k = 0; right && k < 16; ++k) right = sum[k] == a[k] + b[k];
          (right ? out[c].ok : out[c].wrong)++;
          answered.fetch_add(1);
        } else if (absl::IsUnavailable(r.status())) {
          // Refused (shutting down) or no server any more: this client is done.
          out[c].unavailable++;
          return;
        } else {
          out[c].other.push_back(r.status().ToString());
          return;
        }
      }
    });
  }
  // Every client has had answers before the signal: requests are in flight.
  for (absl::Time deadline = absl::Now() + absl::Seconds(120);
       answered.load() < 20 * kClients && absl::Now() < deadline;)
    absl::SleepFor(absl::Milliseconds(10));
  ASSERT_GE(answered.load(), 20 * kClients);
  (*p)->Signal(SIGTERM);
  // The clients run into the shutdown (their next call after the exit is
  // refused as UNAVAILABLE at the latest).
  auto code = (*p)->Wait(absl::Seconds(60));
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  int ok = 0;
  for (int c = 0; c < kClients; ++c) {
    ok += out[c].ok;
    EXPECT_EQ(out[c].wrong, 0) << "client " << c;
    EXPECT_TRUE(out[c].other.empty()) << "client " << c << ": " << out[c].other.size()
                                      << " requests failed, first: "
                                      << (out[c].other.empty() ? "" : out[c].other[0]);
  }
  EXPECT_GE(ok, 20 * kClients);
}

}  // namespace
}  // namespace kiln::e2e
