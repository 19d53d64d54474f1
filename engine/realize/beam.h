// BEAM search (BEAM=N): instead of trusting the hand-coded CPU heuristics,
// compile variants of a reduce kernel that differ in one heuristic choice
// (register-tile size and count, two vectors per row, unroll, loop order),
// time them on scratch buffers and keep the fastest. N rounds, each starting
// from the best so far. Results are cached on disk per kernel, so the search
// runs once per kernel and machine.
#ifndef KILN_ENGINE_REALIZE_BEAM_H_
#define KILN_ENGINE_REALIZE_BEAM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/codegen/kernel.h"
#include "engine/runtime/device.h"
#include "engine/uop/uop.h"

namespace kiln {

struct BeamResult {
  HeuristicKnobs knobs;
  double default_seconds = 0;  // 0 when taken from the cache
  double best_seconds = 0;
  int variants = 0;            // distinct kernels timed
  bool cached = false;
};

// Searches the knobs of `ast` (a reduce kernel for a "c" renderer device) for
// `rounds` rounds. `param_bytes[i]` is the size of buffer parameter i. The
// defaults come back unchanged when no variant is at least 3% faster.
absl::StatusOr<BeamResult> BeamSearch(const UOpRef& ast, const RendererOptions& ropts,
                                      Device* device, const std::vector<int64_t>& param_bytes,
                                      int rounds);

}  // namespace kiln

#endif  // KILN_ENGINE_REALIZE_BEAM_H_
