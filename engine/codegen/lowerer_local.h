// Local-memory staging of matmul operands on GPUs (shared-memory tiling).
//
// In a matmul-like GPU kernel the threads of a block read the same operand
// elements many times: A (broadcast along N) is read alike by every thread
// of a row of the block, B (broadcast along M) by every thread of a column.
// With staging, the kernel's reduce loop at stage_axis() (chosen by
// Kernel::StageOperands, kernel_gpu.cc) becomes
//
//   for (slice ...) {                       // the stage loop
//     temp0[e] = A[...]; temp1[e] = B[...]; // each thread copies a few elements
//     barrier();
//     for (k in slice) acc += temp0[..] * temp1[..];   // loops + unrolls inside
//     barrier();                            // before the next slice's copy
//   }
//
// A staged operand's tile is the set of elements the block reads in one
// slice: it spans the block (local) axes, the reduce axes inside the slice
// and the upcast axes, except those the operand is broadcast along. The
// copy goes through the operand's view, index and mask: an element outside
// a padded / masked view is stored as 0, so the reads from local memory
// need no gate. One exception: a mask term that the output's store also
// has, on axes the operand's address does not move along (the bounds guard
// of a padded output axis, kept by a broadcast operand), is left out: where
// it is false, the result is never stored. Local memory holds values in
// their computed type (float for float16 / bfloat16). Every thread of the
// block takes part in every copy and barrier (bounds guards only gate loads
// and stores). The heuristics choose it only on GPUs (RendererOptions::gpu);
// CPU kernels never contain it.
#ifndef KILN_ENGINE_CODEGEN_LOWERER_LOCAL_H_
#define KILN_ENGINE_CODEGEN_LOWERER_LOCAL_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/codegen/kernel.h"

namespace kiln {

// One operand staged per slice.
struct StagedOperand {
  const UOp* load = nullptr;  // a LOAD inside the reduce
  // Its buffer index and gate over `vars` (one variable per kernel axis).
  UOpList vars;
  UOpRef index, valid;
  // The axes the tile spans in local-memory order, outermost first: by
  // decreasing stride in the buffer, so that the copy of consecutive
  // elements by consecutive threads reads consecutive addresses.
  std::vector<int> axes;
  std::vector<int64_t> strides;  // local-memory stride of each of `axes`
  int64_t size = 1;              // elements in the tile
  int element_bytes = 4;         // of the computed type
  std::vector<int> broadcast;    // block axes whose threads share each element
};

// The operands of `k` that staging per iteration of reduce axis `axis` would
// stage: float LOADs inside the reduce, broadcast along some block
// axis (so several threads read each element) and moving inside the slice.
std::vector<StagedOperand> StagedOperands(const Kernel& k, int axis);

// The UOps of staging, for the lowerer (lowerer.cc calls it at three
// points). Not thread-safe.
class LocalStager {
 public:
  // nullptr when `k` stages nothing (k.stage_axis() < 0).
  static std::unique_ptr<LocalStager> Create(const Kernel& k);

  int axis() const { return axis_; }
  // The copy of one slice, to emit (pinned, in order) at the start of the
  // stage loop's body: the stores into local memory, then a barrier.
  // `idx`: the per-axis indices of the grid / block axes and of the reduce
  // loops up to the stage axis.
  UOpList Copy(const UOpList& idx) const;
  // The read of `load` from local memory at per-axis indices `idxs`, or
  // nullptr when `load` is not staged. Emit it pinned (after the barrier).
  UOpRef Load(const UOp* load, const UOpList& idxs) const;
  // The barrier closing a slice, after its last reads (`after`).
  UOpRef EndBarrier(const UOpList& after) const;
  // "STAGE(axis,tile sizes)" for LinearProgram::opts.
  std::string Describe() const;

 private:
  explicit LocalStager(const Kernel& k) : k_(k) {}
  const Kernel& k_;
  int axis_ = -1;
  std::vector<StagedOperand> ops_;
  UOpList temps_;  // DEFINE_LOCAL per operand
};

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_LOWERER_LOCAL_H_
