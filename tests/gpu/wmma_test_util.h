// Helpers shared by the two files of tests/gpu:wmma_test.
#ifndef KILN_TESTS_GPU_WMMA_TEST_UTIL_H_
#define KILN_TESTS_GPU_WMMA_TEST_UTIL_H_

#include <optional>
#include <vector>

#include "engine/codegen/kernel.h"
#include "engine/codegen/matmul_match.h"
#include "engine/realize/engine.h"
#include "engine/schedule/schedule.h"
#include "engine/tensor/test_util.h"

namespace kiln::wmma_test {

// Codegen options of a CUDA GPU of compute capability `sm`.
inline RendererOptions CudaOptions(int sm = 90) {
  auto o = CodegenOptions("cuda", "CUDA", sm);
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? *o : RendererOptions{};
}

// Schedules `t` (without running anything) and matches the kernel that
// computes it, the last one; its schedule item goes to *item if not null.
inline std::optional<MatmulSpec> MatchOf(const Tensor& t, ScheduleItem* item = nullptr) {
  EXPECT_TRUE(t.ok()) << t.status();
  auto sched = CreateSchedule({t.uop()}, t.device());
  EXPECT_TRUE(sched.ok()) << sched.status();
  if (!sched.ok() || sched->items.empty()) return std::nullopt;
  auto k = Kernel::Create(sched->items.back().ast, CudaOptions());
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return std::nullopt;
  if (item != nullptr) *item = sched->items.back();
  return MatchMatmul(*k);
}

// x @ y like Tensor::Matmul, but the float32 sum is not cast back to the
// 16-bit input dtype. (a.Cast(f32).Matmul(b.Cast(f32)) does not give that
// kernel: the scheduler realizes the casts, whose results are then expanded,
// as kernels of their own, so the matmul loads float32.)
inline Tensor Float32Matmul(const Tensor& x, const Tensor& y) {
  return (x.Unsqueeze(-2) * y.Transpose(-1, -2).Unsqueeze(-3)).Cast(dtypes::kFloat32).Sum({-1});
}

// The BUFFER under a chain of views / casts.
inline const UOp* BaseBuffer(const UOp* u) {
  while (u->op() != Op::kBuffer && !u->src().empty()) u = u->src(0).get();
  return u;
}

// A spec with dense operands: lda / ldb / ldc the matrices' own widths,
// parameters c = 0, a = 1, b = 2 (the order the scheduler gives a matmul).
inline MatmulSpec DenseSpec(int64_t m, int64_t n, int64_t k, MatLayout la, MatLayout lb, DType in,
                            DType out) {
  MatmulSpec s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.layout_a = la;
  s.layout_b = lb;
  s.lda = la == MatLayout::kRowMajor ? k : m;
  s.ldb = lb == MatLayout::kRowMajor ? n : k;
  s.ldc = n;
  s.in_dtype = in;
  s.out_dtype = out;
  return s;
}

// Hand-made specs covering what the renderer varies: both layouts of A and
// B, warp tiles of 16 and 32, edge blocks with idle warps, every output
// dtype, padded leading dimensions, two batch axes with a broadcast operand,
// reordered parameters, and A and B in one buffer.
inline std::vector<MatmulSpec> SampleSpecs() {
  using L = MatLayout;
  std::vector<MatmulSpec> out;
  out.push_back(
      DenseSpec(64, 48, 32, L::kRowMajor, L::kRowMajor, dtypes::kFloat16, dtypes::kFloat16));
  out.push_back(
      DenseSpec(32, 64, 48, L::kColMajor, L::kColMajor, dtypes::kFloat16, dtypes::kFloat32));
  out.push_back(
      DenseSpec(48, 80, 16, L::kRowMajor, L::kColMajor, dtypes::kBFloat16, dtypes::kBFloat16));
  MatmulSpec batched =
      DenseSpec(32, 32, 32, L::kColMajor, L::kRowMajor, dtypes::kFloat16, dtypes::kFloat32);
  batched.batch = {{2, 0, 3 * 1024, 3 * 1024}, {3, 1024, 1024, 1024}};
  batched.param_b = 1;
  batched.param_a = 2;
  out.push_back(batched);
  MatmulSpec padded =
      DenseSpec(16, 16, 16, L::kRowMajor, L::kRowMajor, dtypes::kBFloat16, dtypes::kFloat32);
  padded.lda = 24;
  padded.ldb = 40;
  padded.ldc = 32;
  out.push_back(padded);
  // a @ a^T: B(k, j) = A(j, k), i.e. A's buffer read column-major.
  MatmulSpec gram =
      DenseSpec(32, 32, 48, L::kRowMajor, L::kColMajor, dtypes::kFloat16, dtypes::kFloat32);
  gram.ldb = 48;
  gram.param_b = 1;
  gram.num_bufs = 2;
  out.push_back(gram);
  MatmulSpec odd =
      DenseSpec(80, 96, 32, L::kRowMajor, L::kColMajor, dtypes::kFloat16, dtypes::kFloat16);
  odd.batch = {{2, 80 * 32, 32 * 96, 80 * 96}};
  out.push_back(odd);
  return out;
}

}  // namespace kiln::wmma_test

#endif  // KILN_TESTS_GPU_WMMA_TEST_UTIL_H_
