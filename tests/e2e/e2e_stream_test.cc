// End to end: ModelStreamInfer's limits. Streams beyond --max-streams are
// refused with RESOURCE_EXHAUSTED (and a slot frees when a stream ends);
// an idle stream does not hold SIGTERM for the exit timeout: kilnd answers
// what the stream sent, ends it and exits 0.
#include <signal.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/testing/http_get.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using Stream = grpc::ClientReaderWriter<inference::ModelInferRequest,
                                        inference::ModelStreamInferResponse>;

std::vector<ClientTensor> Inputs(int i) {
  std::vector<float> a(16), b(16);
  for (int k = 0; k < 16; ++k) {
    a[k] = static_cast<float>(i + k);
    b[k] = 1;
  }
  return {FloatTensor("INPUT0", a, {1, 16}), FloatTensor("INPUT1", b, {1, 16})};
}

// Batches of 8 behind a 600 s batching window: requests stay queued.
const std::string kSlow = SimpleBatchedConfig(600000000, true);

// Sends one request on `stream` and reads its answer: the stream is open
// and served.
void RoundTrip(Stream* stream, int i) {
  ASSERT_TRUE(stream->Write(BuildInferRequest("simple", Inputs(i), InferOptions())));
  inference::ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  ASSERT_TRUE(r.error_message().empty()) << r.error_message();
  auto out = ParseInferResponse(r.infer_response());
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> sum = Floats((*out)[0]);
  ASSERT_EQ(sum.size(), 16u);
  EXPECT_EQ(sum[3], static_cast<float>(i + 3 + 1));
}

TEST(E2eStreamTest, StreamsBeyondTheLimitAreRefused) {
  auto repo = MakeRepo("stream_limit_repo", {});
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto p = KilnProcess::Start("server/kilnd", {"--model-repository=" + *repo, "--max-streams=2"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto client = (*p)->Client();
  grpc::ClientContext c1, c2, c3, c4;
  auto s1 = client->stub()->ModelStreamInfer(&c1);
  auto s2 = client->stub()->ModelStreamInfer(&c2);
  RoundTrip(s1.get(), 1);
  RoundTrip(s2.get(), 2);
  auto s3 = client->stub()->ModelStreamInfer(&c3);
  inference::ModelStreamInferResponse r;
  s3->Write(BuildInferRequest("simple", Inputs(3), InferOptions()));
  EXPECT_FALSE(s3->Read(&r));
  grpc::Status st = s3->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  // The first stream ends: its slot is free again.
  s1->WritesDone();
  EXPECT_FALSE(s1->Read(&r));
  EXPECT_TRUE(s1->Finish().ok());
  auto s4 = client->stub()->ModelStreamInfer(&c4);
  RoundTrip(s4.get(), 4);
  s4->WritesDone();
  s2->WritesDone();
  EXPECT_TRUE(s4->Finish().ok());
  EXPECT_TRUE(s2->Finish().ok());
}

// A client that sends without reading: the stream stops reading at
// --max-stream-inflight unanswered requests (flow control holds the rest
// in the client), so the server holds no more than that for it.
TEST(E2eStreamTest, StreamStopsReadingAtItsInflightLimit) {
  auto repo = MakeRepo("stream_inflight_repo", {{"slow", kSlow}});
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto p = KilnProcess::Start("server/kilnd",
                              {"--model-repository=" + *repo, "--max-stream-inflight=3"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto client = (*p)->Client();
  grpc::ClientContext c;
  auto s = client->stub()->ModelStreamInfer(&c);
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(s->Write(BuildInferRequest("slow", Inputs(i), InferOptions())));
  auto pending = [&] {
    std::string m = testing::HttpGet((*p)->metrics_port(), "/metrics").value_or("");
    const std::string key = "kiln_pending_requests{model=\"slow\",version=\"1\"} ";
    size_t at = m.find(key);
    return at == std::string::npos ? -1 : std::atoi(m.c_str() + at + key.size());
  };
  for (absl::Time deadline = absl::Now() + absl::Seconds(60);
       pending() < 3 && absl::Now() < deadline;)
    absl::SleepFor(absl::Milliseconds(10));
  absl::SleepFor(absl::Milliseconds(500));  // would it read on?
  EXPECT_EQ(pending(), 3);
  c.TryCancel();
  inference::ModelStreamInferResponse r;
  while (s->Read(&r)) {}
  EXPECT_EQ(s->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST(E2eStreamTest, IdleStreamsDoNotHoldShutdown) {
  auto repo = MakeRepo("stream_idle_repo", {});
  ASSERT_TRUE(repo.ok()) << repo.status();
  // An exit timeout far beyond the wait below: only ending idle streams
  // lets kilnd exit in time.
  auto p = KilnProcess::Start("server/kilnd",
                              {"--model-repository=" + *repo, "--exit-timeout=600"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto client = (*p)->Client();
  constexpr int kStreams = 4;
  std::vector<std::unique_ptr<grpc::ClientContext>> ctx;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    ctx.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(client->stub()->ModelStreamInfer(ctx.back().get()));
    RoundTrip(streams.back().get(), i);
  }
  (*p)->Signal(SIGTERM);
  auto code = (*p)->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  for (auto& s : streams) {
    inference::ModelStreamInferResponse r;
    EXPECT_FALSE(s->Read(&r));
    EXPECT_FALSE(s->Finish().ok());
  }
}

}  // namespace
}  // namespace kiln::e2e
