// The linear program a kernel lowers to (engine/codegen/lowerer.h), what a
// renderer prints: its listing, its cost estimates and its spec check.
//
// Linear ops: DEFINE_GLOBAL, DEFINE_VAR, CONST, RANGE / ENDRANGE (loops;
// on CPUs the first global loop is marked parallel; on GPUs global and local
// axes are SPECIAL "gidx<d>" / "lidx<d>" indices), DEFINE_ACC / ASSIGN
// (accumulators), DEFINE_LOCAL / BARRIER (GPU local memory), LOAD / STORE
// (optionally gated), VECTORIZE / GEP, ALU, CAST, BITCAST.
// Thread-safe: plain data and pure functions.
#ifndef KILN_ENGINE_CODEGEN_LINEAR_PROGRAM_H_
#define KILN_ENGINE_CODEGEN_LINEAR_PROGRAM_H_

#include <array>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/uop/uop.h"

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


// The rules every lowered program keeps, which the renderers rely on:
// the buffers come first, DEFINE_GLOBAL 0..num_bufs-1 in order, and only
// there; RANGE / ENDRANGE nest, every loop closed; every source is defined
// earlier and still in scope (a value made inside a loop is not used after
// it; an ASSIGN stands for its accumulator, which lives outside); LOAD and
// STORE address a DEFINE_GLOBAL or DEFINE_LOCAL. InternalError naming the
// first broken rule and the UOp (as ListProgram numbers it) otherwise.
absl::Status CheckLinearProgram(const LinearProgram& p);

// Cost estimates of a linear program: ALU ops x loop trips (index arithmetic
// excluded, MULACC = 2), and bytes per buffer capped at the buffer's size.
void EstimateCosts(LinearProgram* p, const std::vector<int64_t>& buffer_bytes);

// Human-readable listing, one UOp per line (for DEBUG and tests).
std::string ListProgram(const LinearProgram& p);

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_LINEAR_PROGRAM_H_
