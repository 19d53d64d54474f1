// Status helpers: RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status(Or), and
// KILN_CHECK for broken invariants (aborts with a message; never for bad input).
#ifndef KILN_ENGINE_BASE_STATUS_H_
#define KILN_ENGINE_BASE_STATUS_H_

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define KILN_CONCAT_INNER_(a, b) a##b
#define KILN_CONCAT_(a, b) KILN_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                   \
  do {                                          \
    ::absl::Status kiln_status_ = (expr);       \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_statusor_, __LINE__), lhs, expr)

#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

namespace kiln::internal {
[[noreturn]] void CheckFail(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace kiln::internal

// Invariant checks: abort with file:line and the failed condition.
#define KILN_CHECK(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) ::kiln::internal::CheckFail(__FILE__, __LINE__, #cond,              \
                                             ::absl::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

#endif  // KILN_ENGINE_BASE_STATUS_H_
