// Lowering: an optimized Kernel becomes a linear list of UOps (the program a
// renderer prints), plus its launch geometry and cost estimates.
//
// Linear ops: DEFINE_GLOBAL, DEFINE_VAR, CONST, RANGE / ENDRANGE (loops;
// on CPUs the first global loop is marked parallel; on GPUs global and local
// axes are SPECIAL "gidx<d>" / "lidx<d>" indices, d < 3, src[0] = size, with
// extra axes merged by div / mod), DEFINE_ACC / ASSIGN
// (accumulators), LOAD / STORE (optionally gated), VECTORIZE / GEP, ALU,
// CAST, BITCAST. Values of the vector axis are real vector dtypes (float32x8).
// Expressions are hoisted to the outermost loop where their inputs exist.
#ifndef KILN_ENGINE_CODEGEN_LOWERER_H_
#define KILN_ENGINE_CODEGEN_LOWERER_H_

#include "absl/status/statusor.h"
#include "engine/codegen/kernel.h"
#include "engine/codegen/linear_program.h"

namespace kiln {

// Lowers an optimized kernel in declared steps (lowerer.cc: the steps of Lowerer::Run;
// DEBUG>=5 lists the program after each) and checks the result.
absl::StatusOr<LinearProgram> Lower(const Kernel& k);

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_LOWERER_H_
