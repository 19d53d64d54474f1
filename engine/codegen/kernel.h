// Kernel: one kernel AST plus the optimizations applied to it.
//
// All memory ops of the AST (LOAD, STORE, VALID) view the same iteration
// space, the "full shape". Its axes are laid out as
//   [global axes][local axes][group axes][reduce axes][upcast axes]
// Global axes become loops (one of them split across CPU threads) or GPU
// grid dims; local axes (GPU only) become block / workgroup dims; reduce
// axes become inner loops; group axes (GPU only) are reduce axes split across
// the threads of a block, whose partial results are combined through local
// memory after a barrier; upcast axes are unrolled into the kernel body, one
// of them as an explicit vector (float8...).
// Optimizations (OptOps) reshape and permute every view alike:
//   UPCAST(axis, n)  split a global axis and unroll n copies
//   UNROLL(axis, n)  the same for a reduce axis
//   LOCAL(axis, n)   split a global axis into (size/n, n); the n part becomes
//                    the innermost local axis (GPU threads of one block)
//   GROUP(axis, n)   split a reduce axis into (size/n, n); the n part becomes
//                    a group axis (n threads of a block share one reduction);
//                    at most one group axis
// PadGlobal rounds a global axis up to a multiple (GPU bounds guard: the
// padded region is masked in every view, so its loads and stores are gated).
// Hand-coded heuristics pick them (HandCodedOptimizations; the GPU ones when
// RendererOptions::gpu); NOOPT=1 disables them.
// On GPUs the heuristics may also stage matmul operands in local memory: per
// iteration of one reduce loop (stage_axis()), the threads of a block copy
// the slice of the operands they share into local memory, and the reduce
// reads it from there (see engine/codegen/lowerer_local.h).
// Not thread-safe (one Kernel per compile).
#ifndef KILN_ENGINE_CODEGEN_KERNEL_H_
#define KILN_ENGINE_CODEGEN_KERNEL_H_

#include <cstdint>
#include <map>
#include <tuple>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/shape/shape_tracker.h"
#include "engine/uop/uop.h"

namespace kiln {

struct RendererOptions {
  std::string device = "CPU";
  bool gpu = false;           // global axes as grid indices instead of loops
  int vector_bytes = 32;      // vector width of most kernels (AVX2: 32)
  // CPU: wider vectors for reduce kernels that reuse a vector operand across
  // a register tile (matmuls, convolutions), where the FMA rate is the
  // limit; 0: vector_bytes. AVX-512 hosts: 64 (see CodegenOptions).
  int wide_vector_bytes = 0;
  int vector_registers = 16;  // AVX2: 16, AVX-512: 32 (bounds register tiles)
  bool supports_float16 = false;
  int max_upcast = 64;        // max elements per unrolled body
  // CPU: the threads a launch is split across (Device::workers(); 1 when
  // unknown), for the choice of the loop split (kernel_cpu.cc step 6).
  int cpu_threads = 1;
  // GPU launch limits (used when gpu is true).
  int max_local_threads = 1024;   // threads per block / workgroup
  int preferred_local_threads = 256;
  // CUDA only: plain fp16 / bf16 matmuls go to tensor cores (WMMA, see
  // engine/codegen/matmul_match.h) on a GPU of compute capability `sm` (90
  // for sm_90; 0 when unknown).
  bool tensor_cores = false;
  int sm = 0;
  // GPU: stage matmul-like operands in local memory (shared-memory tiling,
  // engine/codegen/lowerer_local.h). KILN_LOCAL_STAGE=0 also turns it off.
  bool local_staging = true;
};

// The choices inside the CPU heuristics that BEAM search varies (the
// defaults are the hand-coded ones).
struct HeuristicKnobs {
  int reuse_first = 0;      // register-tile amount tried first (0: 4, 3, 5, 2)
  int reuse_axes = -1;      // axes register-tiled (-1: 1 with a vector axis, else 2)
  bool two_vectors = true;  // two vectors per tile row when the vector axis allows
  int unroll = 4;           // inner reduce loop unroll (<= 1: none)
  bool reorder = true;      // sort loops by tile size (step 5)
  std::string ToString() const;
  static std::optional<HeuristicKnobs> Parse(const std::string& s);
  bool operator==(const HeuristicKnobs& o) const { return ToString() == o.ToString(); }
};

enum class OptOp { kUpcast, kUnroll, kLocal, kGroup };

struct Opt {
  OptOp op;
  int axis;     // UPCAST / LOCAL: global axis index; UNROLL / GROUP: index among reduce axes
  int64_t amount;
  bool vector = false;  // this upcast becomes the vector lane axis
  std::string ToString() const;
};

class Kernel {
 public:
  // `ast` is a SINK of one STORE (see engine/schedule).
  static absl::StatusOr<Kernel> Create(const UOpRef& ast, const RendererOptions& opts);

  const UOpRef& ast() const { return ast_; }
  const Shape& full_shape() const { return full_shape_; }
  const Shape& output_shape() const;
  int ndim() const { return static_cast<int>(full_shape_.size()); }
  int first_reduce() const { return first_reduce_; }
  // First local axis (== first_reduce() when there are none).
  int first_local() const { return first_reduce_ - local_dims_; }
  int local_dims() const { return local_dims_; }
  // Group axes are [first_reduce(), first_reduce() + group_dims()).
  int group_dims() const { return group_dims_; }
  int upcasted() const { return upcasted_; }
  int first_upcast() const { return ndim() - upcasted_; }
  // Vector lane axis (an upcast axis) and its width; -1 / 1 if none.
  int vector_axis() const { return vector_axis_; }
  int64_t vector_width() const { return vector_axis_ < 0 ? 1 : full_shape_[vector_axis_]; }
  bool IsReduceAxis(int axis) const;
  const UOp* reduce() const { return reduce_; }
  const std::vector<Opt>& applied() const { return applied_; }
  const RendererOptions& options() const { return opts_; }
  // The reduce loop per iteration of which the operands are staged in local
  // memory (GPU only), or -1. Chosen last by the heuristics: an opt applied
  // afterwards would move the axis.
  int stage_axis() const { return stage_axis_; }
  // The view of a memory op (LOAD / STORE / VALID) in the current axes.
  const ShapeTracker& StOf(const UOp* mem) const { return sts_.at(mem); }

  absl::Status ApplyOpt(const Opt& opt);
  // Pads global axis `axis` up to `size` (>= its size), masking the new
  // region in every view (see above).
  absl::Status PadGlobal(int axis, int64_t size);
  // Pads reduce axis `axis` up to `size`: the reduce input becomes
  // where(valid, x, identity of the reduce op), so the new positions do not
  // change the result (loads there are masked).
  absl::Status PadReduce(int axis, int64_t size);
  void HandCodedOptimizations(const HeuristicKnobs& knobs = {});
  // "r_64_16_1024_4_8" style: E_ for elementwise, r_ for reduce kernels.
  std::string Name() const;

  // Where the masks of the loads / gates start or end along `axis`, inside
  // (0, size): a single view's mask bounds, or the constants a composed
  // gate compares the axis with. The parts of a concatenation along it.
  std::vector<int64_t> MaskCuts(int axis) const;
  // MaskCuts(axis) when it splits the axis into three or more parts (a
  // concatenation of three or more, a pad on both sides), else none.
  std::vector<int64_t> PartCuts(int axis) const;
  // True when `mem` reads zero everywhere in [lo, hi) along `axis`: its mask
  // (or, through several views, its composed gate) excludes that range. The
  // lowerer skips such loads in a segment of a concatenation's consumer.
  bool MaskedOutOn(const UOp* mem, int axis, int64_t lo, int64_t hi) const;
  // The global loop a CPU kernel splits across threads: the one the CPU
  // heuristics chose (step 6, ChooseParallelAxis), else the first global
  // axis longer than one; -1 when there is none. The loop order does not
  // change: the chosen loop runs over the thread's slice where it stands.
  int ParallelAxis() const;
  // The axis a stack of single slices was upcast along whole
  // (UpcastUnitParts), or -1: the lowerer skips, in each copy, the loads
  // masked out at its index.
  int stacked_axis() const { return stacked_axis_; }

 private:
  Kernel() = default;
  void ReshapeAll(const std::vector<Shape>& new_full_and_out);  // helper
  void PermuteAll(const std::vector<int>& order);
  void SplitAll(int axis, int64_t amount);
  // Grows `axis` to `size` in every full-shaped view (PadGlobal, PadReduce).
  void GrowAxis(int axis, int64_t size);  // axis -> (s/amount, amount) at the end
  // axis -> (s/amount, amount), the amount part moved to position `dest`.
  void SplitTo(int axis, int64_t amount, int dest);
  // ApplyOpt with another bound on the unrolled elements (register tiles
  // counted in vector registers, window unrolls that add no accumulators).
  absl::Status ApplyOptWithin(const Opt& opt, int64_t max_upcast);
  absl::Status ApplyLocal(const Opt& opt);
  absl::Status ApplyGroup(const Opt& opt);
  int64_t BlockThreads() const;  // product of the local and group axes
  void CpuOptimizations(const HeuristicKnobs& knobs);  // kernel_cpu.cc, steps 1-5
  void GpuOptimizations();  // kernel_gpu.cc
  void StageOperands();     // kernel_gpu.cc: sets stage_axis_
  // The step (in window positions) by which axis u moves the window of
  // reduce axis r in some load, when the windows of neighbouring u overlap
  // (1 <= step < size of r, r a window of at most 7); else 0.
  int64_t WindowStep(int u, int r) const;
  bool HasWindow() const;  // some global and reduce axis pair has a WindowStep
  // An elementwise kernel bound by its arithmetic, not its memory traffic:
  // it computes a transcendental (exp2, log2, sin, sqrt, pow) or divides.
  bool ComputeBoundElementwise() const;
  // Some op of the kernel is a transcendental or a division (see above).
  bool Transcendental() const;
  void UnrollSlidingWindow();  // heuristics step 3b (kernel.cc)
  void AddIndependentAccumulators(int vec_axis, int64_t width);  // step 3c
  // Per global axis, the product of the UPCASTs applied to it (its tile).
  std::vector<int64_t> GlobalTiles() const;
  bool UpcastUnitParts();      // elementwise: a stack of <= 16 slices in one loop
  void PartsOutermost();       // elementwise: a concatenation's axis first
  void ChooseParallelAxis();   // CPU heuristics step 6: sets parallel_axis_
  // Step 1's alternative for strided windows: the axis it vectorizes, or -1.
  int LanesAcrossStridedWindow(int row_axis, const std::set<const UOp*>& inner);
  // Bytes of the operands (loads) that change along each global axis.
  std::vector<double> OperandBytesAlong() const;
  void MergeAdjacent();
  void DropUnitAxes();
  // How a memory op's index moves along each axis (kNotAffine where it is
  // not a fixed step).
  static constexpr int64_t kNotAffine = INT64_MIN;
  bool Strides(const UOp* mem, std::vector<int64_t>* strides) const;

  UOpRef ast_;
  UOpList keep_;  // UOps made here (PadReduce's VALID) that mems_ points to
  RendererOptions opts_;
  const UOp* reduce_ = nullptr;
  std::vector<const UOp*> mems_;  // memory ops in AST order
  std::map<const UOp*, ShapeTracker> sts_;
  // Caches of values computed from the views (Strides, ComposedGate,
  // MaskedOutOn): cleared by every change of the views.
  void ClearViewCaches();
  // Strides of multi-view trackers.
  mutable std::map<const UOp*, std::vector<int64_t>> stride_cache_;
  // The variable of `axis` and the gate of `mem` (all its views) over
  // variables spanning each axis; cached.
  std::pair<UOpRef, UOpRef> ComposedGate(const UOp* mem, int axis) const;
  // Per mem, the axes' variables and the composed gate (the same for every
  // axis: one ToIndex per mem, not per axis asked about);
  // per (gate, lo, hi), the answer (the loads of one part share a gate).
  mutable std::map<const UOp*, std::pair<UOpList, UOpRef>> gate_cache_;
  mutable std::map<std::tuple<const UOp*, int64_t, int64_t>, bool> masked_out_cache_;
  Shape full_shape_;
  int first_reduce_ = 0;
  int upcasted_ = 0;
  int local_dims_ = 0;
  int group_dims_ = 0;
  int vector_axis_ = -1;
  int stage_axis_ = -1;
  int stacked_axis_ = -1;
  int parallel_axis_ = -1;  // -1: the first global axis longer than one
  std::vector<Opt> applied_;
};

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_KERNEL_H_
