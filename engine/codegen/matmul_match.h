// Recognizes kernels that are a plain matrix multiply, for the tensor-core
// (WMMA) path of the CUDA device (engine/renderer/cuda_wmma.h).
//
// MatchMatmul looks at a Kernel straight from Kernel::Create (before any
// optimization) and matches exactly
//   SINK(STORE(C, [CAST] REDUCE_AXIS(ADD, product)))
// with product one of
//   MUL(CAST_f32(LOAD A), CAST_f32(LOAD B))   (a.Cast(f32) @ b.Cast(f32))
//   CAST_f32(MUL(LOAD A, LOAD B))             (Tensor::Matmul of fp16 / bf16)
// where A and B are float16 or both bfloat16, the reduce accumulates in
// float32 and C is float32 or the input dtype. Tensor cores multiply exactly
// and accumulate in float32, so for the second form they skip the rounding
// of each product to the input dtype: results are slightly more accurate
// than the scalar kernel's, never less. A reduce in float16 (accumulating in
// half precision) is not matched: the tensor-core result would differ too
// much from the scalar kernel's.
// Layout rules (see MatmulSpec): one reduce axis K; output axes M and N plus
// optional batch axes; single views without masks and offset 0; A has
// stride 0 along N, B along M; A unit-stride along K or M, B along N or K, C
// along N; M, N, K multiples of 16; leading dimensions multiples of 8 and
// batch strides multiples of 16 elements (so every 16x16 tile starts 32-byte
// aligned, as wmma::load_matrix_sync requires).
// Anything else (epilogues, masks, odd sizes, float32 inputs) is nullopt and
// the kernel goes the normal way. Pure function; thread-safe.
#ifndef KILN_ENGINE_CODEGEN_MATMUL_MATCH_H_
#define KILN_ENGINE_CODEGEN_MATMUL_MATCH_H_

#include <optional>

#include "engine/codegen/kernel.h"
#include "engine/codegen/matmul_spec.h"

namespace kiln {

std::optional<MatmulSpec> MatchMatmul(const Kernel& k);

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_MATMUL_MATCH_H_
