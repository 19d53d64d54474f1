// The status table: every absl code has its row, the HTTP statuses are the
// documented ones, and messages are cut as for gRPC.
#include "server/status_codes.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(StatusCodesTest, EveryCodeHasItsRow) {
  int n = 0;
  const StatusCodeRow* table = StatusCodeTable(&n);
  ASSERT_EQ(n, 17);
  std::set<std::string> names;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(static_cast<int>(table[i].code), i);
    EXPECT_EQ(&StatusCodeRowOf(table[i].code), &table[i]);
    EXPECT_TRUE(names.insert(table[i].name).second) << table[i].name;
    EXPECT_STRNE(HttpReasonPhrase(table[i].http_status), "Unknown") << table[i].name;
  }
  EXPECT_STREQ(StatusCodeName(static_cast<absl::StatusCode>(99)), "UNKNOWN");
  EXPECT_EQ(HttpStatusOf(static_cast<absl::StatusCode>(-3)), 500);
}

TEST(StatusCodesTest, HttpStatuses) {
  using C = absl::StatusCode;
  const std::pair<C, int> want[] = {
      {C::kOk, 200},           {C::kCancelled, 499},          {C::kUnknown, 500},
      {C::kInvalidArgument, 400}, {C::kDeadlineExceeded, 504}, {C::kNotFound, 404},
      {C::kAlreadyExists, 409}, {C::kPermissionDenied, 403},   {C::kResourceExhausted, 429},
      {C::kFailedPrecondition, 400}, {C::kAborted, 409},       {C::kOutOfRange, 400},
      {C::kUnimplemented, 501}, {C::kInternal, 500},           {C::kUnavailable, 503},
      {C::kDataLoss, 500},     {C::kUnauthenticated, 401},
  };
  for (const auto& [code, http] : want) EXPECT_EQ(HttpStatusOf(code), http) << StatusCodeName(code);
  EXPECT_EQ(ReasonOf(absl::NotFoundError("x")), "not_found");
}

TEST(StatusCodesTest, MessagesAreCut) {
  std::string big(10000, 'a');
  std::string m = ErrorMessageOf(absl::InvalidArgumentError(big));
  EXPECT_EQ(m, std::string(4096, 'a') + "...(10000 bytes)");
  EXPECT_EQ(ErrorMessageOf(absl::InvalidArgumentError("short")), "short");
}

}  // namespace
}  // namespace kiln
