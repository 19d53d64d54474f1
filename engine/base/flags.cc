#include "engine/base/flags.h"

#include <cstdlib>

namespace kiln {

int64_t GetEnvInt(const char* name, int64_t def) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (end == v) return def;
  return x;
}

std::string GetEnvString(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return (v == nullptr || *v == '\0') ? def : std::string(v);
}

EnvFlags EnvFlags::FromEnv() {
  EnvFlags f;
  f.debug = static_cast<int>(GetEnvInt("DEBUG", 0));
  f.noopt = GetEnvInt("NOOPT", 0) != 0;
  f.beam = static_cast<int>(GetEnvInt("BEAM", 0));
  std::string home = GetEnvString("HOME", "/tmp");
  std::string xdg = GetEnvString("XDG_CACHE_HOME", home + "/.cache");
  f.cache_dir = GetEnvString("KILN_CACHE_DIR", xdg + "/kiln");
  f.threads = static_cast<int>(GetEnvInt("KILN_THREADS", 0));
  f.batch_split = GetEnvInt("KILN_BATCH_SPLIT", 1) != 0;
  return f;
}

const EnvFlags& Env() {
  static const EnvFlags flags = EnvFlags::FromEnv();
  return flags;
}

}  // namespace kiln
