// `kiln perf`'s flags: --protocol, the address default per protocol, the
// ranges of the numeric flags, and the export path checked before any
// connection is made.
#include "clients/perf_cli.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

// Parses `args` (after "kiln") with the perf flags and a --url flag, as
// kiln_main does, and resolves them.
absl::StatusOr<PerfCommand> Resolve(std::vector<std::string> args) {
  FlagParser flags;
  PerfFlags pf;
  std::string url = "localhost:8001", model = "simple";
  flags.AddString("url", &url, "");
  flags.AddString("model", &model, "");
  AddPerfFlags(&flags, &pf);
  args.insert(args.begin(), "kiln");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  absl::Status s = flags.Parse(static_cast<int>(argv.size()), argv.data());
  if (!s.ok()) return s;
  ClientOptions co;
  co.address = url;
  return ResolvePerfFlags(pf, model, "", co, flags.IsSet("url"));
}

TEST(PerfCliTest, ProtocolMustBeGrpcOrHttp) {
  auto c = Resolve({"perf", "--protocol=bogus"});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("--protocol: 'bogus' (use grpc or http)"));
  EXPECT_FALSE(Resolve({"perf", "--protocol", "HTTP"}).ok());
}

TEST(PerfCliTest, AddressDefaultsToTheProtocolsPort) {
  auto grpc = Resolve({"perf"});
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  EXPECT_EQ(grpc->transport.protocol, Protocol::kGrpc);
  EXPECT_EQ(grpc->transport.client.address, "localhost:8001");
  auto http = Resolve({"perf", "--protocol", "http"});
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_EQ(http->transport.protocol, Protocol::kHttp);
  EXPECT_EQ(http->transport.client.address, "localhost:8000");
  auto given = Resolve({"perf", "--protocol=http", "--url=10.0.0.1:9000"});
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->transport.client.address, "10.0.0.1:9000");
}

TEST(PerfCliTest, NumericFlagsAreChecked) {
  auto ok = Resolve({"perf", "--concurrency=1:4", "--batch=2", "--window-ms=50",
                     "--max-windows=4", "--export-json=/tmp/x.json", "--shape=X=1,2"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(ok->options.concurrency, ::testing::ElementsAre(1, 2, 4));
  EXPECT_EQ(ok->options.batch, 2);
  EXPECT_EQ(ok->options.window, absl::Milliseconds(50));
  EXPECT_EQ(ok->options.max_windows, 4);
  EXPECT_EQ(ok->export_json, "/tmp/x.json");
  EXPECT_THAT(ok->options.shapes.at("X"), ::testing::ElementsAre(1, 2));
  for (const char* bad : {"--concurrency=0", "--batch=0", "--window-ms=5", "--max-windows=2",
                          "--stability=0", "--shape=X"}) {
    EXPECT_EQ(Resolve({"perf", bad}).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(PerfCliTest, BadExportPathFailsBeforeConnecting) {
  auto c = Resolve({"perf", "--export-csv=/nonexistent-kiln-dir/perf.csv"});
  ASSERT_TRUE(c.ok()) << c.status();
  // Nothing listens on this address: a run that tried to connect would
  // fail with 1, the path check comes first with 2.
  c->transport.client.address = "127.0.0.1:1";
  EXPECT_EQ(RunPerfCommand(*c), 2);
  c->export_csv.clear();
  c->transport.client.timeout = absl::Seconds(2);
  EXPECT_EQ(RunPerfCommand(*c), 1);
}

TEST(PerfCliTest, BadHttpAddressIsAUsageError) {
  auto c = Resolve({"perf", "--protocol=http", "--url=ftp://x:1"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(RunPerfCommand(*c), 2);
}

TEST(PerfCliTest, SharedMemoryFlags) {
  auto none = Resolve({"perf"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->shared_memory, SharedMemoryMode::kNone);
  auto sys = Resolve({"perf", "--protocol=http", "--shared-memory=system",
                      "--output-shared-memory-size=4096"});
  ASSERT_TRUE(sys.ok()) << sys.status();
  EXPECT_EQ(sys->shared_memory, SharedMemoryMode::kSystem);
  EXPECT_EQ(sys->output_shared_memory_bytes, 4096u);
  auto bad = Resolve({"perf", "--shared-memory=cuda"});
  EXPECT_THAT(bad.status().message(), HasSubstr("--shared-memory: 'cuda' (use none or system)"));
  for (const char* b : {"--output-shared-memory-size=-1", "--output-shared-memory-size=99999999999999"}) {
    EXPECT_EQ(Resolve({"perf", "--shared-memory=system", b}).status().code(),
              absl::StatusCode::kInvalidArgument)
        << b;
  }
  EXPECT_THAT(Resolve({"perf", "--output-shared-memory-size=64"}).status().message(),
              HasSubstr("needs --shared-memory system"));
}

}  // namespace
}  // namespace kiln
