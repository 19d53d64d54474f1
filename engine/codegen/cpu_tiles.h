// Register-tile arithmetic of the CPU heuristics (kernel_cpu.cc step 3):
// which tile of rows and of channel blocks fills the accumulators, from
// the axes' sizes alone. Pure functions; thread-safe.
#ifndef KILN_ENGINE_CODEGEN_CPU_TILES_H_
#define KILN_ENGINE_CODEGEN_CPU_TILES_H_

#include <cstdint>

namespace kiln {

// The tile of lo..hi rows that a row of `n` pixels is padded up to: the
// largest that wastes at most 1/16 of them, else (unless `strict`) the
// least wasteful within 1/8; 0 when none does or n is no longer than it.
int64_t PaddedTile(int64_t n, int64_t lo = 5, int64_t hi = 8, bool strict = false);

// A tile of an odd count of channel blocks (`nb`, rows of one vector each)
// beside a tile of the `n` pixels, within `accs` accumulators: 5 or 3
// blocks (whichever divides nb, 5 first) by the most pixels that fit
// (3 at least), exactly or padded to `padded` (wasting at most 1/16).
// blocks 0 when nb is even or no such tile exists.
struct BlockTile {
  int64_t blocks = 0, rows = 0, padded = 0;
};
BlockTile OddBlockTile(int64_t nb, int64_t n, int64_t accs);

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_CPU_TILES_H_
