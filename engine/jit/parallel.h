// Kernels of a captured segment that may run side by side (internal to
// engine/jit; see jit.h for the contract).
//
// A replay on a device of W workers (a CPU of W threads) runs a segment's
// kernels as independent chains, each kernel on the one worker that took
// it, when the segment's dependency graph is wide enough: its longest chain
// at most kParallelSlack / W of the work (a batch built in W groups of
// slices, engine/onnx/batch_split.h). Otherwise the segment runs in order,
// each kernel across all workers, as before. Kernels of one chain run one
// after the other on the worker that runs the chain's first, while it can
// (their data stays in its cache).
//
// Dependencies come from the buffers the kernels touch: a kernel writes its
// first buffer and reads the others, and a kernel depends on the earlier
// ones that wrote what it reads or writes, and on the earlier readers of
// what it writes. The caller's inputs and the outputs patched in per replay
// count as a buffer each. The cost of a kernel is its estimated time from
// its FLOPs and bytes.
//
// Thread safety: a plan is immutable once built; Run may be called by one
// thread at a time per node (the Jit serializes its calls).
#ifndef KILN_ENGINE_JIT_PARALLEL_H_
#define KILN_ENGINE_JIT_PARALLEL_H_

#include <vector>

#include "absl/status/status.h"
#include "engine/runtime/device.h"

namespace kiln::jit_internal {

struct Node;

// Longest chain at most kParallelSlack / workers of the work: two chains
// of equal work and a short tail at 2 workers.
inline constexpr double kParallelSlack = 1.1;

class ParallelPlan {
 public:
  ParallelPlan(const Node& node, int workers);

  int workers() const { return workers_; }
  bool parallel() const { return parallel_; }
  // The longest chain's share of the estimated work (1: a single chain).
  double critical_share() const { return share_; }

  // Runs the node's items (with the pointers patched into node.ptrs) on
  // dev->RunOnWorkers, each after the items it depends on; the first error
  // stops the others at their next item.
  absl::Status Run(Device* dev, const Node& node, bool debug) const;

 private:
  int workers_;
  bool parallel_ = false;
  double share_ = 1;
  std::vector<std::vector<int>> succ_;  // per item: the items that wait for it
  std::vector<int> npred_;              // per item: how many it waits for
};

}  // namespace kiln::jit_internal

#endif  // KILN_ENGINE_JIT_PARALLEL_H_
