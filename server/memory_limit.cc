#include "server/memory_limit.h"

#include <unistd.h>

#include <fstream>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace kiln {
namespace {

// The first line of a small file (a /sys file holds one number), or "".
std::string ReadSmallFile(const char* path) {
  std::ifstream f(path);
  char buf[64] = {};
  f.read(buf, sizeof(buf) - 1);
  return std::string(buf, static_cast<size_t>(f.gcount()));
}

}  // namespace

uint64_t ParseCgroupMemoryLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(text, &bytes)) return 0;  // "max", empty, garbage
  // cgroup v1 says "unlimited" with the largest page-aligned int64.
  if (bytes >= uint64_t{1} << 62) return 0;
  return bytes;
}

MachineMemory MachineMemoryBytes() {
  MachineMemory m;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 &&
      static_cast<uint64_t>(pages) <= std::numeric_limits<uint64_t>::max() / page) {
    m.bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
    m.source = "physical RAM";
  }
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const uint64_t limit = ParseCgroupMemoryLimit(ReadSmallFile(path));
    if (limit != 0 && (m.bytes == 0 || limit < m.bytes)) {
      m.bytes = limit;
      m.source = path;
    }
  }
  return m;
}

uint64_t DefaultMemoryLimit(const MachineMemory& machine) {
  return machine.bytes / 5 * 4;
}

}  // namespace kiln
