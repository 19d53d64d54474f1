#include "engine/base/status.h"

#include <string>

namespace kiln::internal {

void CheckFail(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "kiln: CHECK failed at %s:%d: %s %s\n", file, line, cond, msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace kiln::internal
