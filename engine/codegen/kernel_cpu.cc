// Hand-coded optimizations for the CPU (C renderer), in order:
//   1. vectorize the output axis the store is contiguous along (512-bit
//      rows for matmul-like reduces when padding to them wastes <= 1/8, and
//      for elementwise transcendentals whose row fills them; a row that is
//      no multiple of the vector is padded, the tail masked); a stride-2
//      window with a long reduce vectorizes another output axis that every
//      load reads contiguously or not at all instead (an image stem's
//      channels: LanesAcrossStridedWindow);
//   2. or vectorize a reduce axis every inner load reads contiguously
//      (512-bit when the reduce computes transcendentals);
//   2b. an elementwise kernel ends here: a stack of <= 16 single slices
//      whose output fits L2 upcast whole (one loop), else a concatenation's
//      parts axis outermost (a loop per part);
//   3. register tiles: 2, 3 or 5 vectors per tile row, and rows along the
//      axes that reuse a broadcast operand (output channels), up to 12
//      accumulators (16 for 512-bit matmul tiles);
//   3b. sliding windows: window rows unrolled so input rows load once a tile;
//   3c. (applied before 3b) fewer than 4 vector accumulators (a max pool):
//       the outermost output axis upcast for independent chains;
//   4. a small unroll of the innermost reduce loop;
//   5. loop order: largest tiles outermost when an axis reuses a vector;
//   6. the loop split across threads (ChooseParallelAxis).
// BEAM (engine/realize/beam.h) times variants of these choices (HeuristicKnobs).
#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <set>
#include <utility>

#include "engine/base/flags.h"
#include "engine/codegen/cpu_tiles.h"
#include "engine/codegen/kernel.h"

namespace kiln {

void Kernel::HandCodedOptimizations(const HeuristicKnobs& knobs) {
  if (Env().noopt || ndim() == 0) return;
  if (opts_.gpu) {
    GpuOptimizations();
    return;
  }
  CpuOptimizations(knobs);
  ChooseParallelAxis();
}

void Kernel::CpuOptimizations(const HeuristicKnobs& knobs) {
  const UOp* store = ast_->src(0).get();
  int itemsize = std::max(1, store->src(0)->dtype().ItemSize());
  int64_t width = std::max(1, opts_.vector_bytes / std::max(4, itemsize));
  if (!opts_.supports_float16 && store->src(0)->dtype().ScalarSize() == 2 &&
      store->src(0)->dtype().IsFloat())
    width = std::min<int64_t>(width, 8);
  auto pick = [&](int64_t size) -> int64_t {
    for (int64_t w = width; w >= 4; w /= 2)
      if (size % w == 0) return w;
    return 0;
  };
  std::vector<int64_t> out_strides;
  bool store_plain = Strides(store, &out_strides);
  // 1. Vectorize the global axis the output is contiguous along.
  int vec_axis = -1;
  // Loads along `axis` are vector loads or broadcasts (not gathers).
  // Only the loads inside the reduce loop matter: one after it (a residual
  // add read transposed) runs once per output vector, a gather is fine there.
  std::set<const UOp*> inner;
  if (reduce_)
    for (const UOp* u : Toposort(reduce_->src(0))) inner.insert(u);
  // Whether every load inside the reduce loop reads `axis` with a stride
  // `ok` accepts.
  auto inner_loads_read = [&](int axis, auto ok) {
    for (const UOp* m : mems_) {
      if (m == store || m->op() == Op::kValid || !inner.count(m)) continue;
      std::vector<int64_t> st;
      if (!Strides(m, &st) || !ok(st[axis])) return false;
    }
    return true;
  };
  // Stride 2 (a strided convolution's window) loads two vectors and
  // shuffles (see SpanLoad in lowerer.cc).
  auto loads_vectorize = [&](int axis) {
    return inner_loads_read(axis, [](int64_t s) { return s >= 0 && s <= 2; });
  };
  // Some input is broadcast along `axis` (stride 0): upcasting it reuses loads.
  auto broadcast_along = [&](int axis) {
    for (const UOp* m : mems_) {
      std::vector<int64_t> st;
      if (m != store && Strides(m, &st) && st[axis] == 0 && full_shape_[axis] > 1) return true;
    }
    return false;
  };
  bool wide_tiles = false;  // 512-bit matmul tiles (16 accumulators, step 3)
  bool lanes_across = false;  // the lanes are not along the store (step 1's alternative)
  if (store_plain) {
    for (int i = first_reduce_ - 1; i >= 0; --i) {
      if (out_strides[i] == 1) {
        if (reduce_ && !loads_vectorize(i)) break;
        if (reduce_ && (vec_axis = LanesAcrossStridedWindow(i, inner)) >= 0) {
          width = vector_width();
          wide_tiles = lanes_across = true;
          break;
        }
        const int64_t n = full_shape_[i];
        // A matmul-like reduce (some input broadcast along the output row)
        // is bound by the FMA rate: the widest vectors, when the row holds
        // two of them. Sliding windows (3x3 / depthwise convolutions) take
        // them too but keep 12 accumulators (wide_tiles false): 8-row tiles
        // of a 3x3 convolution measured 2x slower than 6-row ones.
        const int64_t wide = opts_.wide_vector_bytes / std::max(4, itemsize);
        // (no wider vector on this device: wide is 0)
        const int64_t wide_padded = wide > 0 ? (n + wide - 1) / wide * wide : n;
        // So is a channel block (tensor_blocked.cc) that every load inside
        // the reduce reads whole: a blocked depthwise convolution's taps.
        const bool whole_block =
            n == wide && inner_loads_read(i, [](int64_t s) { return s == 1; });
        if (reduce_ && wide > width && (broadcast_along(i) || whole_block) &&
            (n >= 2 * wide || (wide_padded - n) * 8 <= wide_padded) &&
            store->src(0)->dtype().ScalarSize() == 4) {
          width = wide;
          // (A window whose input is broadcast along a row of one block of
          // output channels, a dense convolution in blocks, tiles like a
          // matmul: its taps are scalar loads, not shifted vectors.)
          wide_tiles = !HasWindow() || (n == wide && broadcast_along(i));
        }
        // An elementwise kernel of transcendentals (SiLU, sigmoid, GELU,
        // softmax's exp) is bound by its instructions: the widest vectors
        // halve them, when the row fills them up to the last 1/8 (a 56- or
        // 14-wide map, 196 merged pixels; the tail is masked).
        const bool transcendental = !reduce_ && ComputeBoundElementwise() &&
                                    store->src(0)->dtype().ScalarSize() == 4;
        if (transcendental && wide > width && (wide_padded - n) * 8 <= wide_padded)
          width = wide;
        // A matmul-like reduce takes 2, 3 or 5 vectors per tile row (step 3):
        // round up to a vector count it can tile (17 -> 3 vectors of 8, 7 -> 8).
        // A row of 8+ vectors is rounded to an even count even when 3 or 5
        // divide it (one vector more, at most 1/10 of the row): 3 or 5
        // vectors with 8 rows exceed the accumulators, and 1 vector x 8 rows
        // was left (Winograd matmuls over 25 vectors of tiles: 120 -> 170-200
        // GFLOP/s; SqueezeNet batch 8 0.90x, ResNet-50 batch 8 0.95x).
        int64_t vecs = (n + width - 1) / width;
        if (reduce_ && knobs.two_vectors && broadcast_along(i) && n > 2 * width && vecs % 2 != 0 &&
            ((vecs % 3 != 0 && vecs % 5 != 0) || vecs >= 8))
          ++vecs;
        const int64_t padded = vecs * width;
        int64_t w = pick(n);
        const bool little_waste = (padded - n) * 8 <= padded;
        if ((w < width || n != padded) && width >= 4 &&
            (n > width ? !w || little_waste : (reduce_ || transcendental) && little_waste)) {
          // An axis that is not a multiple of the vector width (a padded row
          // of 162, 6625 classes, 100 columns): round it up when that wastes
          // at most 1/8 of the lanes (or, past one vector, nothing else
          // vectorizes); the tail lanes are masked off in every load and
          // store. A row shorter than one vector (a 7x7 feature map) only in
          // a reduce, which is bound by its FMAs, or in an elementwise kernel
          // of transcendentals (EfficientNet's SiLU on 7x7 maps of 1152
          // channels: 235 -> 53 us). (clang 14 fails to select some masked
          // index arithmetic of 8-lane elementwise kernels.)
          if (PadGlobal(i, padded).ok()) w = width;
        }
        if (w && ApplyOpt({OptOp::kUpcast, i, w, true}).ok()) vec_axis = i;
        break;
      }
    }
  }
  // 2. Or vectorize a reduce axis that the reduce input reads contiguously.
  //    The innermost reduce axis that some load inside the loop reads
  //    contiguously while every other such load reads it contiguously or
  //    not at all (no gathers in the inner loop).
  if (vec_axis < 0 && reduce_) {
    for (int i = first_upcast() - 1; i >= first_reduce_; --i) {
      bool contiguous = false, ok = true;
      for (const UOp* m : mems_) {
        std::vector<int64_t> st;
        if (m == store || m->op() == Op::kValid || !inner.count(m)) continue;
        if (!Strides(m, &st)) ok = false;
        else if (st[i] == 1) contiguous = true;
        else if (st[i] != 0) ok = false;
      }
      if (!contiguous || !ok) continue;
      // A reduce of transcendentals (a mean of SiLU, a softmax's sum of
      // exp) is bound by its instructions: the widest vectors, when the
      // axis fills them.
      const int64_t wide = opts_.wide_vector_bytes / std::max(4, itemsize);
      if (wide > width && full_shape_[i] % wide == 0 && Transcendental() &&
          store->src(0)->dtype().ScalarSize() == 4)
        width = wide;
      int64_t w = pick(full_shape_[i]);
      if (!w && width >= 4 && full_shape_[i] > width) {
        // A reduce over a length that is not a multiple of 4 (6625 classes):
        // round it up; the extra lanes reduce the op's identity.
        if (PadReduce(i, (full_shape_[i] + width - 1) / width * width).ok()) w = width;
      }
      if (w) (void)ApplyOpt({OptOp::kUnroll, i - first_reduce_, w, true});
      break;
    }
  }
  if (!reduce_) {
    if (!UpcastUnitParts()) PartsOutermost();
    return;
  }
  // 3. Reuse: upcast global axes along which some input is broadcast (stride
  //    0), so one load feeds several accumulators (matmul register tiling).
  //    A row of one vector feeds its accumulators at one load per FMA
  //    (the weight broadcasts): take 2, else 3 or 5 vectors per tile row (a
  //    40-wide feature map is 5 vectors of 8).
  int64_t row_vectors = 1;
  if (knobs.two_vectors && vec_axis >= 0 && broadcast_along(vec_axis)) {
    for (int64_t amt : {2, 3, 5})
      if (full_shape_[vec_axis] % amt == 0) {
        if (ApplyOpt({OptOp::kUpcast, vec_axis, amt}).ok()) row_vectors = amt;
        break;
      }
  }
  // Prefer axes along which a vector load is broadcast (a convolution's
  // input along its output channels): each such load then feeds several
  // accumulators; a broadcast scalar (a weight) is cheap to reload.
  // Without a vector axis, tile two axes (scalar accumulators) instead of one.
  auto reuse_score = [&](int axis) {
    int score = 0;
    for (const UOp* m : mems_) {
      std::vector<int64_t> st;
      if (m == store || !Strides(m, &st) || st[axis] != 0 || full_shape_[axis] <= 1) continue;
      score = std::max(score, vector_axis_ >= 0 && (st[vector_axis_] == 1 || st[vector_axis_] == 2) ? 2 : 1);
    }
    return score;
  };
  std::vector<int> reuse_axes;
  for (int i = first_reduce_ - 1; i >= 0; --i)
    if (i != vec_axis && reuse_score(i) > 0) reuse_axes.push_back(i);
  std::stable_sort(reuse_axes.begin(), reuse_axes.end(),
                   [&](int a, int b) { return reuse_score(a) > reuse_score(b); });
  int reuse_upcasts = knobs.reuse_axes >= 0 ? knobs.reuse_axes : vec_axis >= 0 ? 1 : 2;
  // An output row of exactly one wide vector (a block of 16 output
  // channels, tensor_blocked.cc) tiles a second axis too: its 7 or 8 tile
  // rows leave half the accumulators free, and the row's loads (the
  // broadcast pixels) feed only one FMA each. 2 of the second axis (two
  // channel blocks: 14 or 16 accumulators): a 512 -> 2048 1x1 convolution
  // on 7 x 7, 547 -> 451 us; 256 -> 1024 on 14 x 14, 538 -> 451 us.
  const bool one_vector_row = vec_axis >= 0 && wide_tiles && full_shape_[vec_axis] == 1 &&
                              opts_.vector_registers >= 32 && knobs.reuse_axes < 0;
  if (one_vector_row) reuse_upcasts = 2;
  // The first reuse axis reuses a vector operand (the two rules below keep
  // that true: the first only moves such an axis forward).
  const bool reuses_vector = !reuse_axes.empty() && reuse_score(reuse_axes[0]) == 2;
  // A reused vector operand tiles first the axis that 6-8 rows divide,
  // when the first one would take only 4 or 5 (ViT's 50 tokens per image
  // took 5 rows x 2 vectors, 10 accumulators; its 8 images take 8).
  if (vec_axis >= 0 && knobs.reuse_first <= 0 && reuses_vector) {
    auto divides = [&](int axis, std::initializer_list<int64_t> amounts) {
      for (int64_t amt : amounts)
        if (full_shape_[axis] % amt == 0) return true;
      return false;
    };
    if (!divides(reuse_axes[0], {8, 7, 6}) && divides(reuse_axes[0], {5, 4}))
      for (size_t j = 1; j < reuse_axes.size(); ++j)
        if (reuse_score(reuse_axes[j]) == 2 && divides(reuse_axes[j], {8, 7, 6})) {
          std::rotate(reuse_axes.begin(), reuse_axes.begin() + j, reuse_axes.begin() + j + 1);
          break;
        }
  }
  // Rows of one vector beside an odd count of channel blocks (80 or 48
  // channels, which 2 does not divide: 7 pixels x 1 block left 9 of the 16
  // accumulators idle) tile 5 or 3 blocks by fewer pixels (OddBlockTile):
  // Inception's 80-channel 1x1 convolution on 73 x 73, 430 -> 310 us;
  // SqueezeNet's 1000-class one on 13 x 13, 977 -> 843 us.
  BlockTile odd;
  if (one_vector_row && row_vectors == 1 && reuses_vector)
    for (int j : reuse_axes)
      if (reuse_score(j) == 1) {
        odd = OddBlockTile(full_shape_[j], full_shape_[reuse_axes[0]], 16);
        break;
      }
  int64_t rows = 0;  // the first reuse axis's tile
  std::vector<int64_t> amounts = {4, 3, 5, 2};
  if (knobs.reuse_first > 0) amounts.insert(amounts.begin(), knobs.reuse_first);
  for (int i : reuse_axes) {
    if (reuse_upcasts == 0) break;
    // A vector operand reused along `i` (a matmul / convolution tile): up to
    // 12 vector accumulators. A 6x2 tile keeps both FMA pipes busy past
    // their latency (4x2, 8 accumulators, measured 10-15% slower; 5x2 in
    // between). Scalar reuse keeps the element budget.
    // Likewise output rows of a stride-1 sliding window of 5 or more rows (a
    // 5x5 depthwise convolution), whose input rows step 3b loads once per
    // tile (3x3 windows measured slower with 6 rows than with 4).
    bool slides = false;
    for (int r = first_reduce_ + group_dims_; r < first_upcast(); ++r)
      slides |= full_shape_[r] >= 5 && WindowStep(i, r) == 1;
    std::vector<int64_t> try_amounts = amounts;
    int64_t budget = opts_.max_upcast;
    if (one_vector_row && rows > 0) {
      // The second axis reuses the broadcast scalars (score 1: the output
      // channel blocks), not the vector (more pixel rows would load one
      // more scalar per FMA).
      if (reuse_score(i) != 1) continue;
      const int64_t blocks = odd.blocks ? odd.blocks : 2;
      if (blocks * rows > 16) break;
      try_amounts = {blocks};
      budget = 16 * full_shape_[vector_axis_];
    }
    if (vec_axis >= 0 && (reuse_score(i) == 2 || slides) && knobs.reuse_first <= 0 && rows == 0) {
      // 12 accumulators of 16 registers; 16 of 32 for 512-bit matmul tiles
      // (8 rows of a 3x3 convolution measured 2x slower than 6).
      const int64_t accs = wide_tiles && opts_.vector_registers >= 32 ? 16 : 12;
      // A reused vector operand of one vector per tile row (a 7- or 8-wide
      // feature map) fills the accumulators with more rows: 8 or 12 of one
      // vector (the budget below rejects them for wider rows). A sliding
      // window's 7 rows (a 7 x 7 map, which no smaller amount divides) are
      // tiled whole: one row per tile left one accumulator, a chain of
      // dependent FMAs (EfficientNet's 5x5 depthwise on 7 x 7 x 1152:
      // 160 -> 79 us; ConvNeXt's 7x7 on 7 x 7 x 768: 124 -> 57 us). 7 comes
      // last: 14-row maps keep 2-row tiles (7 measured 1.2x slower there).
      try_amounts = accs >= 16             ? std::vector<int64_t>{8, 7, 6, 5, 4, 3, 2}
                    : reuse_score(i) == 2 ? std::vector<int64_t>{12, 8, 7, 6, 5, 4, 3, 2}
                                          : std::vector<int64_t>{6, 5, 4, 3, 2, 7};
      // Rows of one whole block per pixel that none of those divide (13 x
      // 13 or 27 x 27 maps: 169 or 729 pixels) take the largest divisor
      // that leaves an accumulator free, before 3 or 2 pixels (SqueezeNet's
      // 1x1 convolutions on 13 x 13: 3 blocks x 1 pixel at 75-88 GFLOP/s).
      if (one_vector_row)
        for (int64_t amt = accs - 1; amt > 8; --amt)
          if (full_shape_[i] % amt == 0) {
            try_amounts.insert(try_amounts.end() - 2, amt);
            break;
          }
      budget = std::max<int64_t>(budget, accs * full_shape_[vector_axis_]);
    }
    // Pixels that no such tile divides (17 or 73 wide, 289 merged) are
    // padded up to a tile, the extra pixels masked: the largest tile of 5-8
    // that wastes at most 1/16 of them, else the least wasteful within 1/8
    // (Inception's 17 x 17 layers in blocks: 1 pixel x 3 blocks ran at
    // 50-80 GFLOP/s).
    if (one_vector_row && rows == 0 && reuse_score(i) == 2) {
      const int64_t n = full_shape_[i];
      if (odd.blocks) {
        if (odd.padded == n || PadGlobal(i, odd.padded).ok()) try_amounts = {odd.rows};
      } else {
        bool divides = false;
        for (int64_t amt : try_amounts) divides |= n % amt == 0;
        const int64_t tile = divides ? 0 : PaddedTile(n);
        if (tile > 0 && PadGlobal(i, (n + tile - 1) / tile * tile).ok()) try_amounts = {tile};
      }
    }
    for (int64_t amt : try_amounts) {
      if (full_shape_[i] % amt == 0 && ApplyOptWithin({OptOp::kUpcast, i, amt}, budget).ok()) {
        --reuse_upcasts;
        if (rows == 0) rows = amt;
        break;
      }
    }
  }
  // 3c. Independent accumulators: a reduce with fewer than 4 vector
  //     accumulators per tile (a max pool and a strided depthwise
  //     convolution reuse no operand, a 7-row map no smaller tile divides)
  //     is a chain of dependent max / FMA ops, bound by their latency. The
  //     outermost output axis that 4, 3, 5 or 2 divides (the channels, or
  //     the images) is upcast: independent chains over separate planes,
  //     each plane still walked in the same order. Replay kernel minima, 1
  //     thread: max pools of GoogLeNet 1.50 -> 1.15 ms, ResNet-18 253 -> 166
  //     us, DenseNet-121 225 -> 144 us, SqueezeNet 460 -> 417 us; EfficientNet-B0's
  //     depthwise kernels 820 -> 666 us. Output rows instead (sliding-window
  //     loads shared) measured slower on 112-wide maps (ResNet-18's pool
  //     253 -> 352 us).
  if (vec_axis >= 0) AddIndependentAccumulators(vec_axis, width);
  // 3b. Sliding windows: a load whose reduce axis (a window row ky) moves
  //     like an upcast tile axis (output rows) reads rows that neighbouring
  //     tile rows read at other ky. Unrolling that reduce axis makes those
  //     loads the same expression: each input row is loaded once per tile
  //     and feeds every accumulator that needs it (a 5x5 depthwise
  //     convolution with 4 rows per tile: 8 row loads instead of 20).
  if (vec_axis >= 0) UnrollSlidingWindow();
  // 4. Unroll the innermost reduce loop a little.
  int last_reduce = first_upcast() - 1;
  if (knobs.unroll > 1 && last_reduce >= first_reduce_ &&
      full_shape_[last_reduce] >= 4 * knobs.unroll && full_shape_[last_reduce] % knobs.unroll == 0)
    (void)ApplyOpt({OptOp::kUnroll, last_reduce - first_reduce_, knobs.unroll});
  // 5. Loop order with register tiles. A tile column of the reused input
  //    stays in cache while the axes that reuse it (score 2: a vector
  //    operand broadcast along them, e.g. a convolution's output channels)
  //    run inside: sort the global axes by tile size, largest outermost --
  //    only when such an axis exists (a depthwise convolution reuses nothing
  //    and keeps its row-major walk). The first axis when untiled (a batch,
  //    whatever it reuses), and the untiled axes after it without that
  //    reuse, stay outermost: each image is walked once (Wide ResNet's
  //    blocked convolutions at batch 8 walked every image once per pair of
  //    channel blocks: 296 -> 285 ms).
  if (first_reduce_ >= 2 && upcasted_ > 1) {
    const std::vector<int64_t> tile = GlobalTiles();
    int keep = 0;
    while (keep < first_reduce_ && tile[keep] == 1 && (reuse_score(keep) < 2 || keep == 0)) ++keep;
    bool reuse = false;
    for (int a = keep; a < first_reduce_; ++a) reuse |= reuse_score(a) == 2;
    std::vector<int> order(ndim());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin() + keep, order.begin() + first_reduce_,
                     [&](int a, int b) { return tile[a] > tile[b]; });
    // An untiled axis along which a much larger operand changes than along
    // a reusing axis placed before it goes outside that axis, when that
    // axis's operand does not sit in L1 anyway: a weight in panels
    // (tensor_panels.cc) changes along the panel axis, the activations
    // along the rows; rows outermost would stream every panel from memory
    // once per row tile (ConvNeXt-T's 49 x 768 x 3072 layer: 9.4 MB per
    // tile of 7 rows, against 150 KB of rows per panel). A 1x1
    // convolution's 6 KB weight stays in L1 either way, and its rows
    // outermost scattered each row's stores over 96 channel planes
    // (MobileNetV2's 112-wide expansion 380 -> 510 us). Likewise a tiled
    // axis that reuses only broadcast scalars (score 1): the channel blocks
    // of a blocked 1x1 convolution (tensor_blocked.cc), whose 4 MB weight
    // was streamed once per tile of 7 pixels, 7 times a layer, behind the
    // pixels' 100 KB.
    const std::vector<double> footprint = OperandBytesAlong();
    for (int i = keep + 1; i < first_reduce_; ++i) {
      const int a = order[i];
      if (reuse_score(a) >= 2 || full_shape_[a] <= 1) continue;
      int j = i;
      while (j > keep && reuse_score(order[j - 1]) == 2 &&
             footprint[order[j - 1]] > (32 << 10) && footprint[a] > 4 * footprint[order[j - 1]])
        --j;
      order.erase(order.begin() + i);
      order.insert(order.begin() + j, a);
    }
    bool identity = true;
    for (int i = 0; i < ndim(); ++i) identity &= order[i] == i;
    // Lanes stored one by one (step 1's alternative) keep the row-major
    // walk: tile after tile then completes the cache lines of each output
    // plane (an image stem's 7x7 weights, 37 KB, stay in L1 either way;
    // its output rows innermost measured 1.43-1.64 against 1.27-1.42 ms).
    if (knobs.reorder && reuse && !identity && !lanes_across) PermuteAll(order);
  }
}

void Kernel::AddIndependentAccumulators(int vec_axis, int64_t width) {
  const std::vector<int64_t> tile = GlobalTiles();
  int64_t accs = 1;
  for (int64_t t : tile) accs *= t;
  if (accs / width >= 4) return;
  for (int i = 0; i < first_reduce_; ++i) {
    if (i == vec_axis || tile[i] != 1 || full_shape_[i] <= 1) continue;
    for (int64_t amt : {4, 3, 5, 2})
      if (full_shape_[i] % amt == 0 && ApplyOpt({OptOp::kUpcast, i, amt}).ok()) return;
  }
}

// An elementwise kernel whose parts are the single indices of a short axis
// (Winograd's 16 transformed planes; a stack of a few tensors) computes them
// all in one loop: the axis is upcast whole, each copy's gates fold to its
// own part as the lowerer builds it, and the loads the parts share are read
// once. As segments (a loop per part) a transform read each input tile 16
// times and compiled 16 loop nests. Only while the output fits a core's L2
// (kUnitPartsBytes): writing 16 streams of 229 KiB planes at once (ResNet-18's
// 56 x 56 input transform, 3.7 MB) ran 2x slower than writing them one
// after the other; at 28 x 28 (0.9 MB) it ran 2.4x faster, the output
// transforms 1.4-2x faster.
bool Kernel::UpcastUnitParts() {
  constexpr int64_t kMaxParts = 16;
  constexpr int64_t kUnitPartsBytes = int64_t{1} << 20;
  const UOp* store = ast_->src(0).get();
  int64_t out_bytes = std::max(1, store->src(0)->dtype().ItemSize());
  for (int64_t d : full_shape_) out_bytes *= d;
  if (out_bytes > kUnitPartsBytes) return false;
  for (int a = 0; a < first_reduce_; ++a) {
    const int64_t n = full_shape_[a];
    if (n < 2 || n > kMaxParts || static_cast<int64_t>(PartCuts(a).size()) != n - 1) continue;
    int64_t up = 1;
    for (int i = first_upcast(); i < ndim(); ++i) up *= full_shape_[i];
    if (!ApplyOptWithin({OptOp::kUpcast, a, n}, up * n).ok()) return false;
    stacked_axis_ = ndim() - 1;
    return true;
  }
  return false;
}

// An elementwise kernel whose loads change along an inner axis at two or
// more places (a batch of concatenations: the parts run along the channels)
// walks that axis outermost, so the lowerer gives each part its own loop
// (Segments in lowerer.cc). The images then are the inner loop; each (part,
// image) block is still read and written contiguously.
void Kernel::PartsOutermost() {
  const int first = ParallelAxis();
  if (first < 0 || !PartCuts(first).empty()) return;
  for (int a = first + 1; a < first_reduce_; ++a) {
    if (PartCuts(a).empty()) continue;
    std::vector<int> order = {a};
    for (int i = 0; i < ndim(); ++i)
      if (i != a) order.push_back(i);
    PermuteAll(order);
    return;
  }
}

// 1 (alternative). A strided window (a stride-2 convolution: some load
//    inside the reduce steps 2 along the output row, two vector loads and a
//    shuffle per tap) with a long reduce, when another output axis has
//    every load inside the reduce read it contiguously or not at all, one
//    at least contiguously, and fills whole vectors: an image stem's output
//    channels, its weights laid out channels-innermost at load
//    (engine/onnx/ops_nn.cc). That axis takes the lanes: each tap is then
//    one weight vector and a broadcast input value per output pixel, and an
//    output vector is stored lane by lane (16 stores against a reduce of
//    64+ FMAs). Returns the axis, upcast to the widest vector, or -1.
int Kernel::LanesAcrossStridedWindow(int row_axis, const std::set<const UOp*>& inner) {
  constexpr int64_t kMinReduce = 64;
  const UOp* store = ast_->src(0).get();
  if (store->src(0)->dtype().ScalarSize() != 4) return -1;
  int64_t reduce = 1;
  for (int r = first_reduce_; r < first_upcast(); ++r) reduce *= full_shape_[r];
  if (reduce < kMinReduce) return -1;
  std::vector<std::vector<int64_t>> strides;  // of the loads inside the reduce
  bool strided = false;
  for (const UOp* m : mems_) {
    if (m == store || m->op() == Op::kValid || !inner.count(m)) continue;
    strides.emplace_back();
    if (!Strides(m, &strides.back())) return -1;
    strided |= strides.back()[row_axis] == 2;
  }
  const int64_t wide = std::max(opts_.wide_vector_bytes, opts_.vector_bytes) / 4;
  if (!strided || wide < 4) return -1;
  for (int a = first_reduce_ - 1; a >= 0; --a) {
    if (a == row_axis || full_shape_[a] % wide != 0) continue;
    bool contiguous = false, plain = true;
    for (const std::vector<int64_t>& st : strides) {
      contiguous |= st[a] == 1;
      plain &= st[a] == 0 || st[a] == 1;
    }
    if (plain && contiguous && ApplyOpt({OptOp::kUpcast, a, wide, true}).ok()) return a;
  }
  return -1;
}

// 6. The loop split across threads, where the loop stands (the loop order is
//    kept): of the global axes whose slices write their own cache lines and
//    split evenly, the one along which the most operand bytes change (each
//    thread then reads the least: a 1x1 convolution's rows, not its output
//    channels, along which the whole input is broadcast); the outer one of
//    equals. Two threads writing the halves of every output row (a
//    column-tile axis of 2 items, 32 of a 56-wide row) share a cache line
//    per row: MobileNetV2's 1x1 expansion ran 150 -> 363 us on 2 threads.
//    Half an axis' slices must span kParallelRunBytes of the output, and
//    the axis an even count or at least 5 items (2 threads within 20% of
//    even). In a reduce kernel, bound by its arithmetic, an axis the
//    threads share within 10% of evenly goes before one they do not,
//    whatever its bytes (2 threads: Inception's 80-channel layers split 5
//    channel blocks 3:2, at 1.63x the speed of one thread; their 17 rows
//    split 9:8). Copies keep the bytes' choice: r3d-18's im2col copy split
//    3:2 along its outer axis took 430 us, evenly along its rows 650. The
//    outermost axis stays when nothing qualifies, and a concatenation's
//    parts axis (PartsOutermost) stays, as does the first axis of a stack
//    upcast whole (UpcastUnitParts).
void Kernel::ChooseParallelAxis() {
  constexpr int64_t kParallelRunBytes = 2048;
  constexpr double kEvenShare = 0.9;
  const int a0 = ParallelAxis();
  const UOp* store = ast_->src(0).get();
  std::vector<int64_t> st;
  // A stack upcast whole keeps its first axis (its strides would be read
  // through every slice's padded views again: 60 ms of ResNet-18's start).
  if (a0 < 0 || stacked_axis_ >= 0 || !PartCuts(a0).empty() || !Strides(store, &st)) return;
  const int64_t itemsize = std::max(1, store->src(0)->dtype().ItemSize());
  auto splits_well = [&](int a) {
    const int64_t n = full_shape_[a];
    if (n < 2 || (n % 2 != 0 && n < 5) || st[a] <= 0) return false;  // (kNotAffine < 0)
    return (n / 2) * st[a] * itemsize >= kParallelRunBytes && PartCuts(a).empty();
  };
  // The share of the threads' time that is work when the axis is split
  // (its items in chunks of ceil(n / threads)).
  const int64_t threads = reduce_ != nullptr ? std::max(1, opts_.cpu_threads) : 1;
  auto even = [&](int a) {
    const int64_t n = full_shape_[a], per = (n + threads - 1) / threads;
    return static_cast<double>(n) / static_cast<double>(per * threads) >= kEvenShare;
  };
  const std::vector<double> bytes = OperandBytesAlong();
  int best = -1;
  for (int a = a0; a < first_reduce_; ++a) {
    if (!splits_well(a)) continue;
    if (best < 0 || std::make_pair(even(a), bytes[a]) > std::make_pair(even(best), bytes[best]))
      best = a;
  }
  if (best > a0) parallel_axis_ = best;
}

void Kernel::UnrollSlidingWindow() {
  for (int r = first_reduce_ + group_dims_; r < first_upcast(); ++r) {
    const int64_t k = full_shape_[r];
    bool reuse = false;
    for (int u = first_upcast(); u < ndim() && !reuse; ++u) {
      // Tile rows u read rows u * step + ky: (n - 1) * step + k distinct
      // rows instead of n * k.
      const int64_t step = WindowStep(u, r), n = full_shape_[u];
      reuse = step >= 1 && ((n - 1) * step + k) * 4 <= n * k * 3;
    }
    if (!reuse) continue;
    // The unrolled copies add loads and FMAs, not accumulators.
    (void)ApplyOptWithin({OptOp::kUnroll, r - first_reduce_, k}, 8 * opts_.max_upcast);
    return;
  }
}

}  // namespace kiln
