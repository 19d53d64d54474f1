// kilnd (the real binary) under --max-memory-bytes (issue 13.2): a request
// whose plan would take the device's memory past the limit gets
// RESOURCE_EXHAUSTED before it allocates, and kilnd goes on serving.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/testing/http_get.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kKilnd[] = "server/kilnd";
constexpr int64_t kLimit = 3 << 20;  // 3 MiB

// The shipped model without batching, so that a request may have any
// number of rows.
constexpr char kRows[] = R"pb(
name: "rows"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [
  { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 16 ] },
  { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 16 ] }
]
output [
  { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 16 ] },
  { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1, 16 ] }
]
)pb";

// Two inputs of `rows` x 16 floats (64 bytes a row each).
std::vector<ClientTensor> Inputs(int64_t rows) {
  std::vector<float> a(rows * 16, 1.5f), b(rows * 16, 2.0f);
  return {FloatTensor("INPUT0", a, {rows, 16}), FloatTensor("INPUT1", b, {rows, 16})};
}

// The value of the sample `series` (name and labels) in a /metrics text; -1
// when absent.
double MetricValue(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + series.size() + 2, nullptr);
}

void ExpectServed(KilnClient* client, int64_t rows) {
  auto out = client->Infer("rows", Inputs(rows));
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  std::vector<float> sum = Floats((*out)[0]), product = Floats((*out)[1]);
  ASSERT_EQ(sum.size(), static_cast<size_t>(rows * 16));
  EXPECT_EQ(sum[0], 3.5f);
  EXPECT_EQ(product.back(), 3.0f);
}

TEST(E2eMemoryTest, RequestOverTheLimitIsRefusedAndServingGoesOn) {
  auto repo = MakeRepo("memory_repo", {{"rows", kRows}});
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + *repo,
                                       absl::StrCat("--max-memory-bytes=", kLimit)});
  ASSERT_TRUE(p.ok()) << p.status();
  auto client = (*p)->Client();
  ExpectServed(client.get(), 4);

  // 2 MiB of inputs fit, but their 2 MiB of outputs do not: refused by
  // the plan, before its buffers are allocated.
  auto planned = client->Infer("rows", Inputs(16384));
  EXPECT_EQ(planned.status().code(), absl::StatusCode::kResourceExhausted) << planned.status();
  EXPECT_THAT(planned.status().message(), HasSubstr("needs new buffers"));
  EXPECT_THAT(planned.status().message(),
              HasSubstr(absl::StrCat("exceed the memory limit of ", kLimit, " bytes")));

  // 4 MiB of inputs alone do not fit: refused when they are copied in.
  auto inputs = client->Infer("rows", Inputs(32768));
  EXPECT_EQ(inputs.status().code(), absl::StatusCode::kResourceExhausted) << inputs.status();
  EXPECT_THAT(inputs.status().message(), HasSubstr("memory limit"));

  // kilnd is fine: small requests, and one just under the limit, are served.
  ExpectServed(client.get(), 2);
  ExpectServed(client.get(), 8192);  // 1 MiB in, 1 MiB out
  auto simple = client->Infer("simple", Inputs(1));
  EXPECT_TRUE(simple.ok()) << simple.status();
  EXPECT_TRUE((*p)->Running());

  // The limit and the process's RSS are exported (issue 13.10).
  auto text = testing::HttpGet((*p)->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr(absl::StrCat("kiln_device_memory_limit_bytes{device=\"CPU\"} ",
                                            kLimit, "\n")));
  EXPECT_GT(MetricValue(*text, "kiln_process_resident_bytes"), 1e6);
  EXPECT_LE(MetricValue(*text, "kiln_device_memory_allocated_bytes{device=\"CPU\"}") +
                MetricValue(*text, "kiln_device_memory_cached_bytes{device=\"CPU\"}"),
            kLimit);
}

TEST(E2eMemoryTest, HelpShowsTheDerivedDefault) {
  std::string out = TempDir("memory_help") + "/help.txt";
  ASSERT_EQ(Shell(absl::StrCat(kKilnd, " --help > ", out, " 2>&1")), 0);
  std::ifstream f(out);
  std::string help((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_THAT(help, HasSubstr("--max-memory-bytes"));
  EXPECT_THAT(help, HasSubstr("80% of"));
}

}  // namespace
}  // namespace kiln::e2e
