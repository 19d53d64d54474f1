// Environment flags, read once per process into an immutable snapshot.
//   DEBUG=1..5   engine debug output (2: one line per kernel, 4: kernel source,
//                5: the linear program after each lowering step)
//   NOOPT=1      disable kernel optimizations (plain loops)
//   BEAM=N       rounds of timed search over the CPU heuristics' choices per
//                reduce kernel (0: the heuristics alone; engine/realize/beam.h)
//   KILN_CACHE_DIR   on-disk cache of compiled kernels (default ~/.cache/kiln)
//   KILN_THREADS     CPU worker threads (default: all cores)
//   KILN_BATCH_SPLIT=0  build batches whole, never in slices of images
//                       (engine/onnx/batch_split.h)
#ifndef KILN_ENGINE_BASE_FLAGS_H_
#define KILN_ENGINE_BASE_FLAGS_H_

#include <cstdint>
#include <string>

namespace kiln {

// Returns the integer value of environment variable `name`, or `def`.
int64_t GetEnvInt(const char* name, int64_t def);
// Returns the value of environment variable `name`, or `def`.
std::string GetEnvString(const char* name, const std::string& def);

struct EnvFlags {
  int debug = 0;
  bool noopt = false;
  int beam = 0;
  std::string cache_dir;
  int threads = 0;  // 0 = hardware concurrency
  bool batch_split = true;

  // Reads the environment now.
  static EnvFlags FromEnv();
};

// The snapshot taken at first use (immutable afterwards).
const EnvFlags& Env();

}  // namespace kiln

#endif  // KILN_ENGINE_BASE_FLAGS_H_
