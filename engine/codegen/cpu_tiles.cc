#include "engine/codegen/cpu_tiles.h"

#include <initializer_list>

namespace kiln {

int64_t PaddedTile(int64_t n, int64_t lo, int64_t hi, bool strict) {
  auto waste = [&](int64_t amt) { return (n + amt - 1) / amt * amt - n; };
  int64_t best = 0;
  for (int64_t amt = hi; amt >= lo; --amt)
    if (!best && waste(amt) * 16 <= n) best = amt;
  if (strict) return best && n > best ? best : 0;
  for (int64_t amt = hi; amt >= lo; --amt)
    if (!best || (waste(best) * 16 > n && waste(amt) < waste(best))) best = amt;
  return best && n > best && waste(best) * 8 <= n ? best : 0;
}

BlockTile OddBlockTile(int64_t nb, int64_t n, int64_t accs) {
  if (nb % 2 == 0 || n < 3) return {};
  for (int64_t b : {5, 3}) {
    if (nb % b != 0) continue;
    const int64_t cap = accs / b;
    for (int64_t r = cap; r >= 3; --r)
      if (n % r == 0) return {b, r, n};
    if (const int64_t r = cap >= 3 ? PaddedTile(n, 3, cap, true) : 0)
      return {b, r, (n + r - 1) / r * r};
  }
  return {};
}

}  // namespace kiln
