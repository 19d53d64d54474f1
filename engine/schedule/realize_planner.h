// Realize planning for the scheduler (schedule.cc): which nodes of a lazy
// graph get their own buffer -- the rules are listed at RealizePlanner in
// realize_planner.cc -- and which CONTIGUOUS copies of a zero-padded value
// compute the value straight into the padded buffer's interior.
// Internal to engine/schedule.
#ifndef KILN_ENGINE_SCHEDULE_REALIZE_PLANNER_H_
#define KILN_ENGINE_SCHEDULE_REALIZE_PLANNER_H_

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/schedule/schedule.h"
#include "engine/uop/uop.h"

namespace kiln {
namespace schedule_internal {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

// The zero padding a VIEW applies to its source, if it is exactly that (one
// view: the source's row-major layout grown by a border that reads as 0).
std::optional<Pads> PlainPad(const UOp& view, ShapeInfer* shapes);

// Whether a GATHER reads its source `x` in place: a buffer through one
// plain view (a weight, an embedding table); else the source is realized.
bool GatherReadsInPlace(const UOp& x);

struct RealizePlan {
  std::unordered_set<const UOp*> realized;   // nodes that get their own buffer
  std::unordered_set<const UOp*> pad_views;  // padding views of pad-fused copies
};

absl::StatusOr<RealizePlan> PlanRealize(const UOpList& roots, ShapeInfer* shapes);

}  // namespace schedule_internal
}  // namespace kiln

#endif  // KILN_ENGINE_SCHEDULE_REALIZE_PLANNER_H_
