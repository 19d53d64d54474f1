// Parts of the scheduler (engine/schedule/schedule.cc) that stand on their
// own: shape inference over the lazy graph (ShapeInfer, declared in
// schedule.h) and the passes over a built schedule.
#ifndef KILN_ENGINE_SCHEDULE_SCHEDULE_PASSES_H_
#define KILN_ENGINE_SCHEDULE_SCHEDULE_PASSES_H_

#include <string>
#include <unordered_set>

#include "absl/status/status.h"
#include "engine/schedule/schedule.h"

namespace kiln {

// Reassigns intermediate buffers (not outputs, not pre-existing) so that a
// buffer is reused once the last kernel reading it has run.
void PlanMemory(Schedule* s, const std::unordered_set<const UOp*>& outputs,
                const std::string& device);

// Replaces the bound variables in the views of a kernel AST by the variables
// (so the AST is the same for every value) and keeps their values.
absl::Status Unbind(ScheduleItem* item);

}  // namespace kiln

#endif  // KILN_ENGINE_SCHEDULE_SCHEDULE_PASSES_H_
