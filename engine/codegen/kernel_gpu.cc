// Hand-coded optimizations for GPU renderers (RendererOptions::gpu):
//   0. reduce kernels with few outputs and a long reduction: GROUP the last
//      reduce axis over up to 256 threads of a block (partial sums combined
//      in local memory), so one output is not one lonely thread;
//   1. reduce kernels with inputs broadcast along output axes (matmul,
//      conv): a 4x4 register tile per thread (UPCAST 4 on two such axes),
//      while enough threads remain to fill the card;
//   2. the innermost reduce loop unrolled by 4;
//   3. blocks: LOCAL on the innermost output axis (the one the store is
//      contiguous along), up to preferred_local_threads threads; a size with
//      no good power-of-two divisor is padded up to a multiple of the block
//      (the padded threads are masked: a bounds guard); what is left of the
//      block goes to the next output axis (2-D blocks). Matmul-like
//      kernels (and those with tiles) get blocks of up to 16x16, either axis
//      padded to a multiple of 16 when it has no power-of-two divisor >= 8;
//   4. matmul-like kernels (two operands, each shared by the threads along
//      a different block axis): the operands are staged in local memory,
//      one slice of about 16 reduce elements at a time (StageOperands).
// No vector upcasts: GPU kernels are scalar per thread.
#include <algorithm>
#include <set>

#include "engine/base/flags.h"
#include "engine/codegen/kernel.h"
#include "engine/codegen/lowerer_local.h"

namespace kiln {
namespace {

// Largest power of two <= limit dividing n (1 if none).
int64_t Pow2Divisor(int64_t n, int64_t limit) {
  int64_t best = 1;
  for (int64_t d = 2; d <= limit; d *= 2)
    if (n % d == 0) best = d;
  return best;
}

bool StagingOn(const RendererOptions& o) {
  return o.local_staging && GetEnvInt("KILN_LOCAL_STAGE", 1) != 0;
}

}  // namespace

void Kernel::GpuOptimizations() {
  const UOp* store = ast_->src(0).get();
  auto global_threads = [&] {
    int64_t t = 1;
    for (int i = 0; i < first_local(); ++i) t *= full_shape_[i];
    return t;
  };
  // Inputs read along `axis` with stride 0 (one load serves the whole axis).
  auto broadcast_along = [&](int axis) {
    for (const UOp* m : mems_) {
      std::vector<int64_t> st;
      if (m != store && Strides(m, &st) && st[axis] == 0 && full_shape_[axis] > 1) return true;
    }
    return false;
  };
  // The axis the output is contiguous along (else the innermost non-unit one).
  int inner = -1;
  std::vector<int64_t> out_strides;
  if (Strides(store, &out_strides)) {
    for (int i = first_local() - 1; i >= 0; --i)
      if (out_strides[i] == 1 && full_shape_[i] > 1) {
        inner = i;
        break;
      }
  }
  if (inner < 0)
    for (int i = first_local() - 1; i >= 0; --i)
      if (full_shape_[i] > 1) {
        inner = i;
        break;
      }

  int tiled = 0;
  if (reduce_) {
    // 0. Cooperative reductions.
    const int lr = first_upcast() - 1;
    if (lr >= first_reduce_ && global_threads() < 4096 && full_shape_[lr] >= 128) {
      int64_t g = Pow2Divisor(full_shape_[lr], opts_.preferred_local_threads);
      if (g >= 16) (void)ApplyOpt({OptOp::kGroup, lr - first_reduce_, g});
    }
    // 1. Register tiles, innermost axes first.
    std::vector<int> axes;
    if (inner >= 0) axes.push_back(inner);
    for (int i = first_local() - 1; i >= 0; --i)
      if (i != inner) axes.push_back(i);
    for (int i : axes) {
      if (tiled == 2 || group_dims_ > 0) break;
      if (!broadcast_along(i) || full_shape_[i] % 4 != 0) continue;
      if (global_threads() / 4 < 16384) break;  // keep enough threads to fill the GPU
      if (ApplyOpt({OptOp::kUpcast, i, 4}).ok()) ++tiled;
    }
    // 2. Unroll the innermost reduce loop.
    int last_reduce = first_upcast() - 1;
    if (last_reduce >= first_reduce_ && full_shape_[last_reduce] >= 16 &&
        full_shape_[last_reduce] % 4 == 0)
      (void)ApplyOpt({OptOp::kUnroll, last_reduce - first_reduce_, 4});
  }
  if (inner < 0) return;

  // 3. Blocks (sharing them with the group threads).
  const int64_t target = std::max<int64_t>(
      1, std::min(opts_.preferred_local_threads, opts_.max_local_threads) / BlockThreads());
  // The second block axis: the next non-unit global axis outward.
  int outer = -1;
  for (int i = inner - 1; i >= 0; --i)
    if (full_shape_[i] > 1) {
      outer = i;
      break;
    }
  // Two inputs of the reduce, one shared along `a` (broadcast) while it
  // moves along `b`, the other the reverse: matmul's A and B.
  auto shared_crosswise = [&](int a, int b) {
    bool ab = false, ba = false;
    for (const UOp* u : Toposort(reduce_->src(0))) {
      std::vector<int64_t> st;
      if (u->op() != Op::kLoad || !Strides(u, &st)) continue;
      ab |= st[a] == 0 && st[b] != 0;
      ba |= st[b] == 0 && st[a] != 0;
    }
    return ab && ba;
  };
  // Matmul-like kernels get 2-D blocks of up to 16 x 16 threads (with the
  // register tiles, or to stage the operands each row / column of threads
  // shares, StageOperands): an axis with no power-of-two divisor of at
  // least 8 is padded to a multiple of 16 (guarded).
  const bool square = tiled == 2 || (StagingOn(opts_) && reduce_ && group_dims_ == 0 &&
                                     outer >= 0 && shared_crosswise(inner, outer));
  auto pad16 = [&](int axis) { return PadGlobal(axis, (full_shape_[axis] + 15) / 16 * 16).ok(); };
  int64_t n = full_shape_[inner];
  int64_t first_cap = square ? 16 : target;
  int64_t l;
  if (target == 1) {
    l = 1;
  } else if (n <= first_cap) {
    l = n;
  } else {
    l = Pow2Divisor(n, first_cap);
    if (l < 32 && first_cap >= 32) {
      // No good divisor: pad the axis to a multiple of the block (guarded).
      int64_t padded = (n + first_cap - 1) / first_cap * first_cap;
      if (PadGlobal(inner, padded).ok()) l = first_cap;
    } else if (square && l < 8 && pad16(inner)) {
      l = 16;
    }
  }
  int64_t l2 = 1;
  if (outer >= 0 && l < target) {
    int64_t room = target / l;
    int64_t m = full_shape_[outer];
    l2 = m <= room ? m : Pow2Divisor(m, room);
    if (square && l2 < 8 && m > room && room >= 16 && pad16(outer)) l2 = 16;
  }
  // The outer block axis first, so the inner one becomes lidx0 (x).
  if (l2 > 1) (void)ApplyOpt({OptOp::kLocal, outer, l2});
  if (l > 1) (void)ApplyOpt({OptOp::kLocal, inner, l});
  // 4. Last: staging names an axis that later opts would move.
  StageOperands();
}

// Splits the innermost reduce loop (K / unroll) into (slices, f) so that a
// slice holds f * unroll ~ kSliceK elements of K. A loop with no such
// power-of-two divisor is padded up to a multiple of it (PadReduce: the
// reduce reads its identity there) when that wastes at most a quarter; a
// slice below 4 elements of K is not worth two barriers, so it is declined.
// Tries smaller slices until the operands fit in kMaxLocalBytes and each
// thread copies at most kMaxCopies elements per slice (the copy is unrolled).
void Kernel::StageOperands() {
  constexpr int64_t kSliceK = 16, kMaxLocalBytes = 16384, kMaxCopies = 16;
  if (!StagingOn(opts_) || !reduce_ || group_dims_ > 0 || local_dims_ < 2) return;
  const int r = first_upcast() - 1;  // the innermost reduce loop
  if (r < first_reduce_) return;
  int64_t unroll = 1;
  for (int a = first_upcast(); a < ndim(); ++a)
    if (IsReduceAxis(a)) unroll *= full_shape_[a];
  const int64_t target = std::max<int64_t>(1, kSliceK / unroll);
  const int64_t n = full_shape_[r];
  int64_t f = Pow2Divisor(n, std::min(target, n / 2));  // at least two slices
  Kernel base = *this;  // changed only if staging is chosen
  if (f * unroll < 8 && n > target) {
    const int64_t padded = (n + target - 1) / target * target;
    if ((padded - n) * 4 <= padded && base.PadReduce(r, padded).ok()) f = target;
  }
  for (; f * unroll >= 4; f /= 2) {
    Kernel t = base;
    if (f > 1) t.SplitTo(r, f, r + 1);  // (slices, f): the f part is a loop inside the slice
    std::vector<StagedOperand> ops = StagedOperands(t, r);
    // The matmul pattern: at least two operands, shared along different
    // block axes (A by the threads along N, B by those along M).
    std::set<int> shared_along;
    int64_t bytes = 0, copies = 0;
    for (const StagedOperand& o : ops) {
      shared_along.insert(o.broadcast.begin(), o.broadcast.end());
      bytes += o.size * o.element_bytes;
      copies += (o.size + t.BlockThreads() - 1) / t.BlockThreads();
    }
    if (ops.size() < 2 || shared_along.size() < 2) return;
    if (bytes <= kMaxLocalBytes && copies <= kMaxCopies) {
      t.stage_axis_ = r;
      *this = std::move(t);
      return;
    }
    if (f == 1) return;
  }
}

}  // namespace kiln
