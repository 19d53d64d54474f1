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

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/codegen/kernel.h"

namespace kiln {

struct LinearProgram {
  std::string name;
  UOpList uops;                             // in program order
  // CPU: global[0] = parallel loop size. GPU: blocks (workgroups) per grid
  // dim and threads per block dim (CUDA convention; OpenCL's global work
  // size is global * local).
  std::array<int64_t, 3> global = {1, 1, 1};
  std::array<int64_t, 3> local = {1, 1, 1};
  int num_bufs = 0;
  std::vector<std::string> vars;            // DEFINE_VAR names, in order
  // Estimates for one launch: ALU ops (multiply-add counts 2), bytes moved.
  double flops = 0;
  double bytes = 0;
  std::vector<std::string> opts;            // applied optimizations, for DEBUG
};

absl::StatusOr<LinearProgram> Lower(const Kernel& k);

// Cost estimates of a linear program: ALU ops x loop trips (index arithmetic
// excluded, MULACC = 2), and bytes per buffer capped at the buffer's size.
void EstimateCosts(LinearProgram* p, const std::vector<int64_t>& buffer_bytes);

// Human-readable listing, one UOp per line (for DEBUG and tests).
std::string ListProgram(const LinearProgram& p);

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_LOWERER_H_
