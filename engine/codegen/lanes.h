// Vector lanes during lowering (internal to engine/codegen). While a kernel
// with a vector axis is lowered, index and gate expressions are built with a
// `lane` variable (0..w-1); Lanes turns them into vector code:
//   At(e, l)       e for one lane
//   Vector(e, w)   e for all lanes at once (vector ALU ops on (0, 1, ..., w-1))
//   Load(...)      the w-lane load: one vector load for consecutive lanes
//                  (masked per lane where the gate varies by lane), one or two
//                  loads and a shuffle for lanes at constant offsets in at most
//                  two windows of w elements (stride-2 windows, nearest
//                  upsample, interleaved planes), else one gated load per lane.
#ifndef KILN_ENGINE_CODEGEN_LANES_H_
#define KILN_ENGINE_CODEGEN_LANES_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engine/uop/uop.h"

namespace kiln {

bool Contains(const UOpRef& expr, const UOp* v);
// x repeated in w lanes (x itself when w == 1).
UOpRef Broadcast(const UOpRef& x, int64_t w);
// The constant v of dt's scalar type.
UOpRef ConstOf(DType dt, double v);
// A scalar load of buf[idx] that reads 0 where `valid` is false.
UOpRef GatedLoad(const UOpRef& buf, DType dt, const UOpRef& idx, const UOpRef& valid);

class Lanes {
 public:
  explicit Lanes(UOpRef lane) : lane_(std::move(lane)) {}

  UOpRef At(const UOpRef& e, int64_t l) const;
  UOpRef Vector(const UOpRef& e, int64_t w) const;
  // The load of buffer `buf` (element type dt) at `idx` where `valid`, both
  // expressions of the lane, for w lanes.
  UOpRef Load(const UOpRef& buf, DType dt, const UOpRef& idx, const UOpRef& valid,
              int64_t w) const;

 private:
  UOpRef SafeIndex(const UOpRef& valid, const UOpRef& idx) const;
  std::map<int64_t, UOpRef> UsedGates(const UOpRef& valid, const std::vector<int64_t>& off) const;
  UOpRef SpanLoad(const UOpRef& buf, DType dt, const UOpRef& idx, const UOpRef& valid,
                  const UOpRef& idx0, int64_t w) const;

  UOpRef lane_;
};

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_LANES_H_
