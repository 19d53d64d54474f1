// kilnd (the real binary) against operator and client mistakes of issue 13:
// authentication never fails open (13.5), echoed names are cut (13.7), and
// --help lists the flags that control both.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kKilnd[] = "server/kilnd";

std::string Repo() {
  auto repo = MakeRepo("hardening_repo", {});
  EXPECT_TRUE(repo.ok()) << repo.status();
  return repo.ok() ? *repo : "";
}

std::string WriteTokenFile(const std::string& name, const std::string& text) {
  std::string path = TempDir("tokens") + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// kilnd must exit at once, non-zero, saying why.
void ExpectRefusal(std::vector<std::string> args, const std::string& why) {
  args.insert(args.begin(), "--model-repository=" + Repo());
  absl::Time start = absl::Now();
  auto p = KilnProcess::Start(kKilnd, args, absl::Seconds(60));
  ASSERT_FALSE(p.ok()) << "kilnd started with " << args.back();
  EXPECT_THAT(p.status().message(), HasSubstr("kilnd exited with 2"));
  EXPECT_THAT(p.status().message(), HasSubstr(why));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST(E2eHardeningTest, EmptyTokensRefuseToStart) {
  ExpectRefusal({"--auth-token-file=" + WriteTokenFile("empty", "")}, "refusing to start");
  ExpectRefusal({"--auth-token-file=" + WriteTokenFile("newline", "\n")}, "refusing to start");
  ExpectRefusal({"--auth-token-file=" + WriteTokenFile("blank", " \t\r\n\n")},
                "refusing to start");
  ExpectRefusal({"--auth-token-file=" + WriteTokenFile("two", "a\nb\n")}, "more than one line");
  ExpectRefusal({"--auth-token-file=/nonexistent/token"}, "cannot read");
  ExpectRefusal({"--auth-token-file="}, "cannot read");
  ExpectRefusal({"--auth-token="}, "refusing to start");
  ExpectRefusal({"--auth-token", ""}, "refusing to start");
  ExpectRefusal({"--metrics-auth-token-file=" + WriteTokenFile("m_empty", "\n")},
                "refusing to start");
  ::setenv("KILN_AUTH_TOKEN", "", 1);
  ExpectRefusal({}, "$KILN_AUTH_TOKEN is empty");
  ::unsetenv("KILN_AUTH_TOKEN");
}

TEST(E2eHardeningTest, TokenFileWithTrailingNewline) {
  auto p = KilnProcess::Start(
      kKilnd, {"--model-repository=" + Repo(),
               "--auth-token-file=" + WriteTokenFile("good", "t0ken\n")});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->Client()->ServerLive().status().code(), absl::StatusCode::kUnauthenticated);
  auto live = (*p)->Client("t0ken")->ServerLive();
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_TRUE(*live);
  EXPECT_THAT(ReadAll((*p)->log_path()), ::testing::Not(HasSubstr("warning: --auth-token")));
}

TEST(E2eHardeningTest, TokenOnTheCommandLineWarns) {
  auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + Repo(), "--auth-token=t0ken"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(*(*p)->Client("t0ken")->ServerLive());
  std::string log = ReadAll((*p)->log_path());
  EXPECT_THAT(log, HasSubstr("warning: --auth-token puts the token on the command line"));
  EXPECT_THAT(log, HasSubstr("/proc/PID/cmdline"));
  EXPECT_THAT(log, HasSubstr("--auth-token-file"));
  EXPECT_THAT(log, HasSubstr("$KILN_AUTH_TOKEN"));
}

TEST(E2eHardeningTest, LongNamesComeBackCut) {
  auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + Repo(),
                                       "--model-control-mode=explicit", "--load-model=simple"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto client = (*p)->Client();
  const std::string big(1 << 20, 'x');
  std::vector<absl::Status> errors = {
      client->ModelMetadata(big).status(),
      client->Infer(big, {}).status(),
      client->ModelReady("simple", big).status(),
      client->ModelConfig("simple", big).status(),
      client->LoadModel(big),
      client->UnloadModel(big),
      client->Infer("simple", {FloatTensor(big, {1, 2}, {1, 2})}).status(),
  };
  for (const absl::Status& s : errors) {
    EXPECT_FALSE(s.ok());
    EXPECT_LT(s.message().size(), 1024u) << s.message().substr(0, 300);
    EXPECT_THAT(s.message(), HasSubstr("...(1048576 bytes)"));
  }
  EXPECT_TRUE(*client->ModelReady("simple"));  // and the server is fine
}

TEST(E2eHardeningTest, FlagsOutOfRangeRefuseToStart) {
  ExpectRefusal({"--beam=11"}, "--beam must be in [0, 10]");
  ExpectRefusal({"--beam=-1"}, "--beam must be in [0, 10]");
  ExpectRefusal({"--load-timeout=-1"}, "--load-timeout out of range");
  ExpectRefusal({"--load-timeout=nan"}, "--load-timeout");
}

TEST(E2eHardeningTest, HelpListsTheFlags) {
  std::string out = TempDir("help") + "/help.txt";
  ASSERT_EQ(Shell(absl::StrCat(kKilnd, " --help > ", out, " 2>&1")), 0);
  std::string help = ReadAll(out);
  for (const char* flag : {"--auth-token-file", "--auth-token", "--metrics-address",
                           "--metrics-auth-token-file", "--metrics-port", "--beam",
                           "--load-timeout", "--http-port", "--http-address", "--http-threads",
                           "--http-max-body-bytes"})
    EXPECT_THAT(help, HasSubstr(flag));
  EXPECT_THAT(help, HasSubstr("--http-port (default 8000)"));
  EXPECT_THAT(help, HasSubstr("/proc/PID/cmdline"));
  EXPECT_THAT(help, HasSubstr("an empty token refuses to start"));
}

// A token with a newline (read from a file or the environment with its line
// end) is refused by the client library instead of aborting in gRPC.
TEST(E2eHardeningTest, ClientRefusesATokenWithANewline) {
  ClientOptions o;
  o.address = "127.0.0.1:1";
  o.auth_token = "secret\n";
  auto c = KilnClient::Connect(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
}

}  // namespace
}  // namespace kiln::e2e
