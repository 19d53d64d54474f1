// Rules on float arithmetic that the lowerer applies to each ALU node of a
// kernel before lowering it (engine/codegen/lowerer.cc, LowerNode):
//
//   a * b + c, c + a * b  ->  MULACC(a, b, c)          one rounding (an FMA)
//   a * b - c             ->  MULACC(a, b, -c)
//   c - a * b             ->  MULACC(-a, b, c)
//   x / C                 ->  x * (1 / C)              C a constant whose
//                                                     reciprocal is normal
//
// CPU kernels are compiled with -ffp-contract=off, so without the first
// three an elementwise chain's polynomial (Erf's, GELU's) ran as separate
// multiplies and adds; the renderers print MULACC as fma() on every device.
// The contracted forms round once where the graph rounds twice, and x / C
// becomes x * (1 / C), which may differ from the division by 1 ulp (the
// multiply is several times cheaper than a divide on the CPU).
//
// Only float32 and float64 nodes are rewritten (half types keep their
// two roundings). Thread safety: the rule table is immutable.
#ifndef KILN_ENGINE_CODEGEN_FLOAT_RULES_H_
#define KILN_ENGINE_CODEGEN_FLOAT_RULES_H_

#include "engine/uop/uop.h"

namespace kiln {

// The node rewritten by the first rule that applies to it (its sources are
// not visited), or nullptr when none does.
UOpRef RewriteFloatNode(const UOpRef& u);

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_FLOAT_RULES_H_
