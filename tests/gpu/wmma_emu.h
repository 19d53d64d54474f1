// Host emulation of the CUDA features the WMMA matmul kernels use
// (engine/renderer/cuda_wmma.h), so that wmma_test can compile the very same
// kernel source with clang++ and run it on the CPU. wmma_test installs this
// file as mma.h, with cuda_fp16.h and cuda_bf16.h including it.
//
// One emulated thread stands for a whole warp: a fragment holds all 16x16
// elements of its tile (row-major: element (r, c) is x[r * 16 + c]) and
// load / mma / store do the warp's whole operation. That is exact for
// warp-uniform kernels, where every lane executes the same statements.
// Since the accumulator fragments of every type share that mapping here, the
// element-wise float -> half conversion of the kernels is exact too; whether
// it is on real hardware is what the emulation cannot show.
// `Launch` runs a kernel once per (block, warp) with threadIdx.x = warp * 32.
#ifndef KILN_TESTS_GPU_WMMA_EMU_H_
#define KILN_TESTS_GPU_WMMA_EMU_H_

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)

struct kiln_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline kiln_dim3 blockIdx, threadIdx, blockDim, gridDim;

// 16-bit float types as their bit patterns, like the device buffers.
struct __half {
  uint16_t bits;
};
typedef __half half;
struct __nv_bfloat16 {
  uint16_t bits;
};

inline float kiln_emu_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t kiln_emu_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float __half2float(__half h) {
  const uint32_t sign = (h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1f, man = h.bits & 0x3ffu;
  if (exp == 0x1f) return kiln_emu_float(sign | 0x7f800000u | (man << 13));  // inf / nan
  if (exp != 0) return kiln_emu_float(sign | ((exp + 112) << 23) | (man << 13));
  // Subnormal (or zero): man * 2^-24, exact in float.
  const float v = static_cast<float>(man) * kiln_emu_float(0x33800000u);
  return sign ? -v : v;
}

// Round to nearest even, overflow to inf, subnormals kept.
inline __half __float2half(float f) {
  const uint32_t x = kiln_emu_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u)};
  if (ax >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to inf
  if (ax < 0x38800000u) {  // half subnormal: round f / 2^-24 to an integer
    const float scaled = kiln_emu_float(ax) * kiln_emu_float(0x4b800000u);  // * 2^24
    // Adding and removing 2^23 rounds a float < 2^23 to an integer (nearest even).
    const float r = (scaled + 8388608.0f) - 8388608.0f;
    return {static_cast<uint16_t>(sign | static_cast<uint16_t>(r))};
  }
  uint32_t v = ax - (112u << 23);  // rebias the exponent
  v += 0xfffu + ((v >> 13) & 1u);  // round the 13 dropped bits
  return {static_cast<uint16_t>(sign | (v >> 13))};
}

inline float __bfloat162float(__nv_bfloat16 b) {
  return kiln_emu_float(static_cast<uint32_t>(b.bits) << 16);
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t x = kiln_emu_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((x >> 16) | 0x40u)};
  x += 0x7fffu + ((x >> 16) & 1u);
  return {static_cast<uint16_t>(x >> 16)};
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.bits; }
inline __half __ushort_as_half(unsigned short u) { return {u}; }

inline float kiln_emu_value(float f) { return f; }
inline float kiln_emu_value(__half h) { return __half2float(h); }
inline float kiln_emu_value(__nv_bfloat16 b) { return __bfloat162float(b); }

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulation has 16x16x16 tiles only");
  static constexpr int num_elements = 256;
  T x[256];
};

template <class Use, class T, class Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ld) {
  constexpr bool row = std::is_same<Layout, row_major>::value;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = row ? p[r * ld + c] : p[r + c * ld];
}

inline void fill_fragment(fragment<accumulator, 16, 16, 16, float>& f, float v) {
  for (float& e : f.x) e = v;
}

template <class T>
void store_matrix_sync(T* p, const fragment<accumulator, 16, 16, 16, T>& f, unsigned ld,
                       layout_t layout) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      (layout == mem_row_major ? p[r * ld + c] : p[r + c * ld]) = f.x[r * 16 + c];
}

// d = a @ b + c with float products and sums (d may be c).
template <class T, class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[256];
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      float s = c.x[r * 16 + col];
      for (int k = 0; k < 16; ++k)
        s += kiln_emu_value(a.x[r * 16 + k]) * kiln_emu_value(b.x[k * 16 + col]);
      out[r * 16 + col] = s;
    }
  std::memcpy(d.x, out, sizeof(out));
}

}  // namespace wmma
}  // namespace nvcuda

namespace kiln_emu {

template <class... P, size_t... I>
void Call(void (*kernel)(P...), void* const* bufs, std::index_sequence<I...>) {
  kernel(static_cast<P>(bufs[I])...);
}

// Runs `kernel` on the grid, one call per (block, warp).
template <class... P>
void Launch(void (*kernel)(P...), void* const* bufs, const long long* grid, long long threads) {
  blockDim = {static_cast<unsigned>(threads), 1, 1};
  gridDim = {static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
             static_cast<unsigned>(grid[2])};
  for (unsigned z = 0; z < gridDim.z; ++z)
    for (unsigned y = 0; y < gridDim.y; ++y)
      for (unsigned x = 0; x < gridDim.x; ++x)
        for (unsigned w = 0; w < threads / 32; ++w) {
          blockIdx = {x, y, z};
          threadIdx = {w * 32, 0, 0};
          Call(kernel, bufs, std::index_sequence_for<P...>{});
        }
}

}  // namespace kiln_emu

#endif  // KILN_TESTS_GPU_WMMA_EMU_H_
