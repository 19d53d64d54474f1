// Realize planning for the scheduler (schedule.cc): which nodes of a lazy
// graph get their own buffer -- the rules are listed at RealizePlanner in
// realize_planner.cc -- which CONTIGUOUS copies of a padded value compute
// the value straight into the padded buffer's interior, and which
// concatenations compute each part straight into its slice.
// Internal to engine/schedule.
#ifndef KILN_ENGINE_SCHEDULE_REALIZE_PLANNER_H_
#define KILN_ENGINE_SCHEDULE_REALIZE_PLANNER_H_

#include <cstdint>
#include <optional>
#include <unordered_map>
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

// What a CONTIGUOUS copy of `x` copies when x is a padded value: the view
// that pads the value (PlainPad holds for it), its pads and the value the
// border reads -- 0 for a plain padding view, the constant of Tensor::Pad's
// WHERE(inside, padded, value) for another value (a max pool's -inf).
struct PadSource {
  const UOp* view;
  Pads pads;
  ConstValue fill;
};
std::optional<PadSource> PaddedSource(const UOp& x, ShapeInfer* shapes);

// A concatenation (Tensor::Cat: WHERE(inside_k, padded part k, rest), the
// innermost rest the first part's padding view): the parts' padding views
// in order along the one axis they fill side by side, and the WHEREs that
// join them (the outermost first).
struct Concat {
  std::vector<PadSource> parts;
  std::vector<const UOp*> wheres;
};
std::optional<Concat> ConcatParts(const UOp& x, ShapeInfer* shapes);

// Whether a GATHER reads its source `x` in place: a buffer through one
// plain view (a weight, an embedding table); else the source is realized.
bool GatherReadsInPlace(const UOp& x);

struct RealizePlan {
  std::unordered_set<const UOp*> realized;  // nodes that get their own buffer
  // CONTIGUOUS copies of a padded value computed straight into the padded
  // buffer's interior, with what each copies.
  std::unordered_map<const UOp*, PadSource> padded;
  // Concatenations (or CONTIGUOUS copies of one) whose parts are computed
  // into their slices of the node's buffer, with the parts.
  std::unordered_map<const UOp*, Concat> concats;
};

absl::StatusOr<RealizePlan> PlanRealize(const UOpList& roots, ShapeInfer* shapes);

}  // namespace schedule_internal
}  // namespace kiln

#endif  // KILN_ENGINE_SCHEDULE_REALIZE_PLANNER_H_
