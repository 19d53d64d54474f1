// Runs a child process with a time limit and an address-space limit, for
// the robustness tests (a crash, a hang or an exhausted machine must show as
// a test failure, not take the test or the host down).
//
// Thread-compatible.
#ifndef KILN_TESTS_ROBUSTNESS_SUBPROCESS_H_
#define KILN_TESTS_ROBUSTNESS_SUBPROCESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace kiln::hostile {

struct ProcessResult {
  bool started = false;
  bool timed_out = false;  // killed after the time limit
  int exit_code = -1;      // when it exited normally
  int signal = 0;          // when a signal ended it
  std::string out, err;    // stdout, stderr
  // "exit 1", "signal 6 (Aborted)", "timed out".
  std::string Describe() const;
};

// Runs argv[0] with `argv` (no shell). The child gets RLIMIT_AS of
// `address_space_bytes` (0: unlimited) and is SIGKILLed after `timeout`.
ProcessResult RunProcess(const std::vector<std::string>& argv, absl::Duration timeout,
                         uint64_t address_space_bytes);

// The address-space limit the tests give kiln processes: big allocations
// then fail inside the process instead of exhausting the shared host.
#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer reserves terabytes of shadow address space, so a sanitized
// binary cannot run under an address-space limit: none (0) then, and ASan's
// own allocator limit (tools/asan: allocator_may_return_null=1) stands in.
inline constexpr uint64_t kChildAddressSpace = 0;
#else
inline constexpr uint64_t kChildAddressSpace = uint64_t{8} << 30;
#endif

}  // namespace kiln::hostile

#endif  // KILN_TESTS_ROBUSTNESS_SUBPROCESS_H_
