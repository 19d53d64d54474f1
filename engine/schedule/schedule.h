// The scheduler: turns the lazy tensor graph into kernels.
//
// Tensor graph ops: BUFFER (flat, realized), CONST (scalar), VIEW (movement,
// arg ShapeTracker), ALU / CAST / BITCAST (elementwise, equal shapes),
// REDUCE_AXIS (arg {op, axes...}, reduced axes become 1), CONTIGUOUS.
//
// Fusion rules: elementwise chains fuse into one kernel, into the input of a
// reduce and after it; movement ops are pushed into the loads (a padded view
// over an op that does not map 0 to 0 is guarded by its validity mask).
// A node is realized into its own buffer when it is requested, CONTIGUOUS, a
// reduce with several users or seen through a view that is not a plain
// reshape, or when fusing it would put two reduces in one kernel.
// Intermediate buffers are assigned by a memory planner that reuses a buffer
// once its last reader has run.
#ifndef KILN_ENGINE_SCHEDULE_SCHEDULE_H_
#define KILN_ENGINE_SCHEDULE_SCHEDULE_H_

#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/shape/shape_tracker.h"
#include "engine/uop/uop.h"

namespace kiln {

// One kernel: ast is a SINK of one STORE; DEFINE_GLOBAL(i) reads / writes
// bufs[i] (BUFFER UOps); bufs[0] is the output.
struct ScheduleItem {
  UOpRef ast;
  UOpList bufs;
  // Values of the variables bound in the views this kernel reads or writes
  // (the AST has the unbound variables, so it is the same for every value).
  std::vector<std::pair<std::string, int64_t>> var_vals;
};

// Realize a root into an existing buffer, through a view of it (an
// assignment), instead of into a new buffer of its own.
struct ScheduleTarget {
  UOpRef buffer;    // a BUFFER
  ShapeTracker st = ShapeTracker::FromShape({});  // the root's shape -> the buffer; no mask
};

struct Schedule {
  std::vector<ScheduleItem> items;
  // For each requested root: the BUFFER holding it (contiguous, root's shape).
  UOpList outputs;
  // Buffers the planner created for intermediates (each allocated once).
  UOpList intermediates;
};

// Shapes of tensor-graph nodes (memoized; keeps what it saw alive).
class ShapeInfer {
 public:
  const Shape& Of(const UOpRef& u);

 private:
  std::unordered_map<const UOp*, Shape> memo_;
  UOpList keep_;
};

// Builds the kernels that realize `roots` on `device`. With a target, there
// is one root and it is computed into target->buffer through target->st.
absl::StatusOr<Schedule> CreateSchedule(const UOpList& roots, const std::string& device,
                                        const ScheduleTarget* target = nullptr);

}  // namespace kiln

#endif  // KILN_ENGINE_SCHEDULE_SCHEDULE_H_
