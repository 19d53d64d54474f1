// BatchSplitter: builds a batch as slices of images (each slice a graph of
// its own, realized one after the other, depth first) instead of layer by
// layer over the whole batch, where the model computes image by image
// (BatchTracker, batch_tracker.h) and that moves fewer bytes.
//
// A batch of 8 MobileNetV2 images, layer by layer, writes 38 MB per
// expansion layer and reads it back from memory; one image at a time it
// stays in the caches (its 3x3 stride-2 depthwise layer: 3.7 ms for the
// batch, 8 x 0.22 ms one image at a time). Slices cost a second read of
// every weight per slice, more kernel launches, and smaller kernels to split
// across threads. On a CPU of W threads the slices are built in W groups of
// consecutive images, each realized before the next is built, so that a JIT
// replay runs the groups side by side, each kernel on one thread
// (engine/jit/parallel.h): at 2 threads every zoo model measured 5-20%
// slower in slices whose kernels each split across both threads.
#ifndef KILN_ENGINE_ONNX_BATCH_SPLIT_H_
#define KILN_ENGINE_ONNX_BATCH_SPLIT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/onnx/batch_tracker.h"
#include "engine/onnx/op_context.h"
#include "engine/runtime/device.h"

namespace kiln {

// Most bytes per slice of the largest intermediate: a model whose largest
// batched value takes more per image than this for the whole batch is built
// in slices of as many images as stay within it (at least 1). 1 MiB is a
// core's L2 here; the slices' intermediates then are written and read back
// while they are in the caches.
inline constexpr double kSliceBytes = 1 << 20;
// Slices are used when the whole batch would write and read back more than
// kSliceMargin x the bytes of weights the extra slices read again.
inline constexpr double kSliceMargin = 1.5;

// Builds a model's graph for a batch in slices where the model allows it
// and the batch's intermediates outgrow the caches (BatchTracker), else
// whole. The choice is made once per input signature, on the first call:
// the graph is built at full batch with a tracker, then for the first slice
// with another (BatchTracker::SameImages); if either refuses, the whole
// batch is used from then on. The slices' outputs are concatenated along
// axis 0 (lazily: each slice's graph ends in the concatenation's buffer).
//
// Thread-safe.
class BatchSplitter {
 public:
  using Build = std::function<absl::StatusOr<std::vector<OnnxValue>>(
      const std::vector<OnnxValue>& inputs, BatchTracker* tracker)>;
  struct Choice {
    int64_t batch = 0;   // n
    int64_t images = 0;  // per slice; == batch: not split
    double image_bytes = 0;  // the largest intermediate, per image (0: not measured)
    std::string reason;  // why not, when not split
    int64_t groups = 1;  // slices built in this many groups (see Policy)
  };

  // How the calling thread's batches are built: `off` says why not in
  // slices ("" when they may be); `groups` > 1 builds the slices in that
  // many groups of consecutive images, each realized before the next is
  // built (its own buffers: a chain of kernels a replay may run beside the
  // others).
  struct Policy {
    std::string off;
    int groups = 1;
  };
  // Asked on every batch, since a thread's ThreadPool::Scope may give it
  // another number of cores than the next caller's.
  using PolicyFn = std::function<Policy()>;

  // The graph's input names and, per input, whether its declared axis 0
  // is dynamic (a batch may come there); the graph's output names; the
  // policy (e.g. PolicyFor the model's device).
  BatchSplitter(std::vector<std::string> inputs, std::vector<bool> dynamic_axis0,
                std::vector<std::string> outputs, PolicyFn policy)
      : inputs_(std::move(inputs)),
        dynamic_axis0_(std::move(dynamic_axis0)),
        outputs_(std::move(outputs)),
        policy_(std::move(policy)) {}

  // Slices on the CPU device only (one group per thread a launch from the
  // calling thread runs on), and not with KILN_BATCH_SPLIT=0.
  static Policy PolicyFor(const Device& device);

  absl::StatusOr<std::vector<OnnxValue>> Run(const std::vector<OnnxValue>& inputs,
                                             const Build& build) const;
  // The choice for the signature of `inputs`, if one was made (or, when
  // batches are built whole for this thread, that and why).
  std::optional<Choice> ChoiceFor(const std::vector<OnnxValue>& inputs) const;

 private:
  // The batch size n of `inputs` and which of them carry it; 0 when no
  // input with a dynamic axis 0 has n > 1 or they disagree.
  int64_t BatchOf(const std::vector<OnnxValue>& inputs, std::vector<bool>* batched) const;
  // Decides for a batch of n built in `groups` groups (builds it whole with
  // a tracker, then its first slice with another); returns the whole
  // batch's outputs, and the first slice's in *first when slices were
  // chosen.
  absl::StatusOr<std::vector<OnnxValue>> Choose(const std::vector<OnnxValue>& inputs,
                                                const std::vector<bool>& batched, int64_t n,
                                                int64_t groups, const Build& build,
                                                Choice* choice,
                                                std::vector<OnnxValue>* first) const;

  // Stores `c` as the choice for `key` (evicting one when kMaxChoices are
  // kept); mu_ is held.
  void Remember(const std::string& key, Choice c) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<std::string> inputs_;
  const std::vector<bool> dynamic_axis0_;
  const std::vector<std::string> outputs_;
  const PolicyFn policy_;
  mutable absl::Mutex mu_;
  mutable std::map<std::string, Choice> choices_ ABSL_GUARDED_BY(mu_);
};

// Input signatures whose choice is kept (per model).
inline constexpr size_t kMaxChoices = 256;

// Most slices per batch: each is a graph to build.
inline constexpr int64_t kMaxSlices = 64;

// Images per slice: the largest divisor of n up to kSliceBytes /
// image_bytes (at least 1), in at most kMaxSlices slices (else the fewest
// images over kMaxSlices slices); n when the whole batch fits, or when n has
// no divisor that makes 2..kMaxSlices slices (a large prime).
int64_t SliceImages(int64_t n, double image_bytes);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_BATCH_SPLIT_H_
