// Bearer tokens never fail open (issue 13.5): an empty, whitespace-only or
// newline-only token from any source is an error, a trailing newline of a
// token file is dropped, and a token on the command line warns.
#include "server/auth_token.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;

std::string TokenFile(const std::string& name, const std::string& text) {
  std::string path = absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp", "/",
                                  name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

absl::StatusOr<AuthToken> FromFile(const std::string& text) {
  AuthTokenSources s;
  s.file = TokenFile("token", text);
  return ResolveAuthToken(s);
}

TEST(AuthTokenTest, NoSourceMeansNoAuth) {
  auto t = ResolveAuthToken({});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->token, "");
  EXPECT_EQ(t->warning, "");
}

TEST(AuthTokenTest, FileTokenDropsTheTrailingNewline) {
  for (const char* text : {"t0ken", "t0ken\n", "t0ken\r\n", "  t0ken \n\n"}) {
    auto t = FromFile(text);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->token, "t0ken");
    EXPECT_EQ(t->warning, "");
  }
}

TEST(AuthTokenTest, EmptyOrBlankFileRefuses) {
  for (const char* text : {"", "\n", "\n\n", "   ", " \t\r\n"}) {
    auto t = FromFile(text);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << "'" << text << "'";
    EXPECT_THAT(t.status().message(), HasSubstr("empty"));
  }
}

TEST(AuthTokenTest, BadFileRefuses) {
  EXPECT_THAT(FromFile("one\ntwo\n").status().message(), HasSubstr("more than one line"));
  EXPECT_THAT(FromFile("a b").status().message(), HasSubstr("visible ASCII"));
  EXPECT_THAT(FromFile(std::string(5000, 'x')).status().message(), HasSubstr("larger than"));
  AuthTokenSources s;
  s.file = "/nonexistent/token";
  EXPECT_THAT(ResolveAuthToken(s).status().message(), HasSubstr("cannot read"));
  s.file = "";  // --auth-token-file= given empty
  EXPECT_FALSE(ResolveAuthToken(s).ok());
}

TEST(AuthTokenTest, EmptyFlagRefuses) {
  for (const char* flag : {"", " ", "\n"}) {
    AuthTokenSources s;
    s.flag = flag;
    EXPECT_EQ(ResolveAuthToken(s).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(AuthTokenTest, FlagTokenWarns) {
  AuthTokenSources s;
  s.flag = "t0ken";
  auto t = ResolveAuthToken(s);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->token, "t0ken");
  EXPECT_THAT(t->warning, HasSubstr("/proc/PID/cmdline"));
  EXPECT_THAT(t->warning, HasSubstr("--auth-token-file"));
  EXPECT_THAT(t->warning, HasSubstr("KILN_AUTH_TOKEN"));
}

TEST(AuthTokenTest, Environment) {
  AuthTokenSources s;
  s.env = "t0ken\n";
  EXPECT_EQ(ResolveAuthToken(s)->token, "t0ken");
  s.env = "";
  EXPECT_FALSE(ResolveAuthToken(s).ok());
  s.flag = "flag";  // the flag wins over the environment
  EXPECT_EQ(ResolveAuthToken(s)->token, "flag");
}

TEST(AuthTokenTest, FlagAndFileTogetherRefuse) {
  AuthTokenSources s;
  s.flag = "a";
  s.file = TokenFile("both", "b");
  EXPECT_THAT(ResolveAuthToken(s).status().message(), HasSubstr("not both"));
}

}  // namespace
}  // namespace kiln
