// MatmulSpec: a plain (optionally batched) matrix multiply C = A @ B as the
// tensor-core path sees it, with the memory layout of every operand.
//
// It is plain data, shared by the matcher (engine/codegen/matmul_match.h,
// which finds it in a kernel AST) and the WMMA renderer
// (engine/renderer/cuda_wmma.h, which prints a kernel for it). It lives in
// its own header-only target so that the renderer does not depend on the
// rest of codegen.
//
// Element (i, k) of A (M x K) is at a[i * lda + k] when A is row-major and at
// a[i + k * lda] when it is column-major; likewise (k, j) of B (K x N).
// C (M x N) is always row-major: c[i * ldc + j]. Batch axis b adds
// index * stride_x elements to each operand's base (stride 0 broadcasts).
#ifndef KILN_ENGINE_CODEGEN_MATMUL_SPEC_H_
#define KILN_ENGINE_CODEGEN_MATMUL_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/base/dtype.h"

namespace kiln {

enum class MatLayout { kRowMajor, kColMajor };

struct MatmulSpec {
  struct BatchAxis {
    int64_t size = 1;
    int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // in elements
  };

  int64_t m = 0, n = 0, k = 0;
  std::vector<BatchAxis> batch;  // outermost first; empty when not batched
  MatLayout layout_a = MatLayout::kRowMajor;
  MatLayout layout_b = MatLayout::kRowMajor;
  int64_t lda = 0, ldb = 0, ldc = 0;   // leading dimensions, in elements
  DType in_dtype = dtypes::kFloat16;   // A and B: float16 or bfloat16
  DType out_dtype = dtypes::kFloat32;  // C: float32 or in_dtype
  // Kernel parameter (DEFINE_GLOBAL) index of each operand; A and B share
  // one when they are views of the same buffer.
  int param_a = 1, param_b = 2, param_c = 0;
  int num_bufs = 3;

  int64_t batch_count() const {
    int64_t n_batch = 1;
    for (const BatchAxis& b : batch) n_batch *= b.size;
    return n_batch;
  }

  // "64x48x32 batch=3 A=row(32) B=col(32) C=row(48) float16->float32 params a=1 b=2 c=0"
  std::string ToString() const {
    auto lay = [](MatLayout l, int64_t ld) {
      return std::string(l == MatLayout::kRowMajor ? "row(" : "col(") + std::to_string(ld) + ")";
    };
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
           " batch=" + std::to_string(batch_count()) + " A=" + lay(layout_a, lda) +
           " B=" + lay(layout_b, ldb) + " C=" + lay(MatLayout::kRowMajor, ldc) + " " +
           in_dtype.Name() + "->" + out_dtype.Name() + " params a=" + std::to_string(param_a) +
           " b=" + std::to_string(param_b) + " c=" + std::to_string(param_c);
  }
};

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_MATMUL_SPEC_H_
