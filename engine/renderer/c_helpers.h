// Source text of the C renderer's vector helper functions: the static inline
// functions emitted before the kernels that use them (exp2 of float lanes,
// masked vector loads / stores of 4-byte lanes). The renderer picks the type
// names and the helper's name; these build the bodies.
//
// Thread safety: pure functions.
#ifndef KILN_ENGINE_RENDERER_C_HELPERS_H_
#define KILN_ENGINE_RENDERER_C_HELPERS_H_

#include <string>

namespace kiln::c_helpers {

// Type names of one masked vector access of `lanes` (4, 8 or 16) 4-byte lanes.
struct MaskedTypes {
  int lanes = 8;
  std::string vec;       // the value's vector type (kf32x8, ki32x8, ...)
  std::string gate;      // the bool vector type of the per-lane gates
  std::string fvec;      // float vector of the same lane count
  std::string ivec;      // int32 vector of the same lane count
  std::string unaligned; // the value's vector type with 4-byte alignment
  std::string scalar;    // the C type of one lane in memory
};

// `name`(x): 2^x per lane, without a libm call (Cephes' exp2f polynomial, a
// few ulp; denormals, 0, inf and NaN as libm). `ty` float lanes, `it` int32
// lanes of the same count, `lanes` that count.
std::string Exp2(const std::string& name, const std::string& ty, const std::string& it, int lanes);
// The same polynomial for one float (`name`(x)): scalar kernels (rows
// shorter than a vector, reduce bodies) then need no libm call either.
std::string ScalarExp2(const std::string& name);

// `name`(p, g, alt): lane i is p[i] where gate g[i] is set, else alt[i]; the
// memory of unset lanes is not touched (AVX / AVX-512 masked moves, a lane
// loop without them). All lanes set: one plain vector load.
std::string MaskedLoad(const std::string& name, const MaskedTypes& t);

// `name`(p, g, v): writes v[i] to p[i] where g[i] is set, nothing else.
std::string MaskedStore(const std::string& name, const MaskedTypes& t);

}  // namespace kiln::c_helpers

#endif  // KILN_ENGINE_RENDERER_C_HELPERS_H_
