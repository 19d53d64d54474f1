// Tensor-core matmul kernels for the CUDA device: CUDA C++ using
// nvcuda::wmma (<mma.h>) for a MatmulSpec found by MatchMatmul
// (engine/codegen/matmul_match.h).
//
// Kernel ABI: extern "C" __global__ NAME(data0, ..., data{num_bufs-1}), the
// buffers in the order the scalar kernel would take them (spec.param_*), as
// `float*` / `half*` / `__nv_bfloat16*`; no symbolic vars. Each warp owns a
// tile of C of 1x1, 1x2, 2x1 or 2x2 16x16 fragments (2 along an axis whose
// size is a multiple of 32), accumulates in float32 fragments over K in
// steps of 16, reading A and B straight from global memory (no shared-memory
// staging), and stores its tile once. Blocks are up to 2x2 warps; blockIdx.x
// walks N, .y walks M, .z the batch. Every statement is warp-uniform (the
// only branch tests a warp's tile index), which is what lets
// tests/gpu:wmma_test execute the same source on the host, one emulated
// thread per warp.
// A float16 / bfloat16 C is converted element by element from the float32
// accumulator into a half accumulator fragment and stored from there (bf16
// values travel as bit patterns through that half fragment: WMMA has no
// bf16 accumulator). This relies on the float and half accumulator
// fragments mapping element i to the same (row, col), which holds where
// wmma lowers to mma.sync.m16n8k16 (sm_80 and newer) and is why those
// outputs require sm_80 (see WmmaSupported).
// The source includes <mma.h>, <cuda_fp16.h> and <cuda_bf16.h>: NVRTC 13 has
// them only through an include path (engine/runtime/cuda_device.cc).
// Pure functions; thread-safe.
#ifndef KILN_ENGINE_RENDERER_CUDA_WMMA_H_
#define KILN_ENGINE_RENDERER_CUDA_WMMA_H_

#include <array>
#include <cstdint>
#include <string>

#include "engine/codegen/matmul_spec.h"

namespace kiln {

struct WmmaKernel {
  std::string source;
  // Blocks per grid dim and threads per block (as LinearProgram::global /
  // local: the CUDA convention).
  std::array<int64_t, 3> global = {1, 1, 1};
  std::array<int64_t, 3> local = {1, 1, 1};
  double flops = 0;  // 2 * M * N * K * batch
  double bytes = 0;  // A + B (once per distinct batch) + C
};

// Whether a GPU of compute capability `sm` (75 for sm_75) runs the kernel of
// `spec`: float16 inputs need sm_70, bfloat16 inputs and 16-bit outputs
// sm_80 (see above), and the grid must fit CUDA's limits. Sets *why (if not
// null) when it does not.
bool WmmaSupported(const MatmulSpec& spec, int sm, std::string* why = nullptr);

WmmaKernel RenderWmma(const std::string& name, const MatmulSpec& spec);

}  // namespace kiln

#endif  // KILN_ENGINE_RENDERER_CUDA_WMMA_H_
