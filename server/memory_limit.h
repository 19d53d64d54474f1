// kilnd's default memory limit (--max-memory-bytes): a share of what the
// machine lets this process have, the physical RAM or the cgroup's memory
// limit when that is set and smaller (containers, Kubernetes pods).
//
// Thread safety: pure functions (MachineMemoryBytes reads sysconf and /sys).
#ifndef KILN_SERVER_MEMORY_LIMIT_H_
#define KILN_SERVER_MEMORY_LIMIT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

// The cgroup limit in `text`, the contents of cgroup v2's memory.max ("max\n"
// or a byte count) or v1's memory.limit_in_bytes (a huge number when
// unlimited). 0 when there is no limit or the text is not a number.
uint64_t ParseCgroupMemoryLimit(absl::string_view text);

struct MachineMemory {
  uint64_t bytes = 0;  // the smaller of RAM and the cgroup limit; 0 if unknown
  std::string source;  // "physical RAM" or the cgroup file it came from
};

// RAM from sysconf(_SC_PHYS_PAGES) * page size, lowered by the limit of
// /sys/fs/cgroup/memory.max (v2) or /sys/fs/cgroup/memory/memory.limit_in_bytes (v1).
MachineMemory MachineMemoryBytes();

// 80% of `machine` (the rest is for kilnd itself: code, compiled kernels,
// gRPC buffers, host copies of tensors). 0 (no limit) when unknown.
uint64_t DefaultMemoryLimit(const MachineMemory& machine);

}  // namespace kiln

#endif  // KILN_SERVER_MEMORY_LIMIT_H_
