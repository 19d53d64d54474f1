// The CUDA C dialect of the C-family renderer (compiled by NVRTC). Grid
// indices are blockIdx / threadIdx; kernels are extern "C" with
// __launch_bounds__ of their block size; float16 conversions use the PTX
// cvt instructions, bfloat16 ones integer arithmetic (any architecture).
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/renderer/cstyle.h"
#include "engine/renderer/renderer.h"

namespace kiln {
namespace {

constexpr const char* kCudaPrelude = R"(template <class T, class F>
__device__ __forceinline__ T kiln_bitcast(F f) {
  static_assert(sizeof(T) == sizeof(F), "bitcast between different sizes");
  union { F f; T t; } u;
  u.f = f;
  return u.t;
}
)";

constexpr const char* kCudaHalf = R"(__device__ __forceinline__ float kiln_h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short kiln_f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float kiln_rh(float f) { return kiln_h2f(kiln_f2h(f)); }
)";

constexpr const char* kCudaBf16 = R"(__device__ __forceinline__ float kiln_bf2f(unsigned short b) {
  return __uint_as_float((unsigned int)b << 16);
}
__device__ __forceinline__ unsigned short kiln_f2bf(float f) {
  unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (unsigned short)(x >> 16);
}
__device__ __forceinline__ float kiln_rbf(float f) { return kiln_bf2f(kiln_f2bf(f)); }
)";

class CudaRenderer : public CStyleRenderer {
 protected:
  std::string ScalarC(ScalarType s) const override {
    switch (s) {
      case ScalarType::kBool:
        return "bool";
      case ScalarType::kInt8:
        return "signed char";
      case ScalarType::kInt16:
        return "short";
      case ScalarType::kInt32:
        return "int";
      case ScalarType::kInt64:
        return "long long";
      case ScalarType::kUInt8:
        return "unsigned char";
      case ScalarType::kUInt16:
        return "unsigned short";
      case ScalarType::kUInt32:
        return "unsigned int";
      case ScalarType::kUInt64:
        return "unsigned long long";
      case ScalarType::kFloat16:
      case ScalarType::kBFloat16:
      case ScalarType::kFloat32:
        return "float";
      case ScalarType::kFloat64:
        return "double";
      default:
        return "void";
    }
  }
  std::string BufferParam(const std::string& storage, const std::string& name,
                          bool read_only) const override {
    return absl::StrCat(read_only ? "const " : "", storage, "* __restrict__ ", name);
  }
  std::string VarParam(const std::string& name) const override {
    return absl::StrCat("long long ", name);
  }
  std::string Special(const std::string& name) const override {
    static const char* kDims[] = {"x", "y", "z"};
    return absl::StrCat(name[0] == 'g' ? "blockIdx." : "threadIdx.", kDims[name[4] - '0']);
  }
  std::string Int64Suffix(bool is_unsigned) const override {
    return is_unsigned ? "ull" : "ll";
  }
  std::string NonFinite(bool is_double, bool nan) const override {
    if (is_double)
      return nan ? "__longlong_as_double(0x7ff8000000000000ll)"
                 : "__longlong_as_double(0x7ff0000000000000ll)";
    return nan ? "__int_as_float(0x7fc00000)" : "__int_as_float(0x7f800000)";
  }
  std::string MathFn(const std::string& fn, bool is_double) const override {
    return is_double ? fn : fn + "f";
  }
  std::string Convert(DType from, DType to, const std::string& ty,
                      const std::string& v) const override {
    if (!from.IsFloat() || !to.IsInt()) return absl::StrCat("((", ty, ")(", v, "))");
    // Truncating, saturating, NaN -> 0 (cvt.rzi); an explicit intrinsic, as
    // a C++ cast of an out-of-range value is undefined behaviour.
    const char* f = from.scalar == ScalarType::kFloat64 ? "__double2" : "__float2";
    switch (to.scalar) {
      case ScalarType::kInt32:
        return absl::StrCat(f, "int_rz(", v, ")");
      case ScalarType::kUInt32:
        return absl::StrCat(f, "uint_rz(", v, ")");
      case ScalarType::kInt64:
        return absl::StrCat(f, "ll_rz(", v, ")");
      case ScalarType::kUInt64:
        return absl::StrCat(f, "ull_rz(", v, ")");
      default: {
        int bits = to.ScalarSize() * 8;
        int64_t lo = to.IsUnsigned() ? 0 : -(int64_t{1} << (bits - 1));
        int64_t hi = to.IsUnsigned() ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
        return absl::StrCat("((", ty, ")min(max(", f, "int_rz(", v, "), ", lo, "), ", hi, "))");
      }
    }
  }
  std::string Bitcast(const std::string& /*from*/, const std::string& to,
                      const std::string& v) const override {
    return absl::StrCat("kiln_bitcast<", to, ">(", v, ")");
  }
  std::string LocalArray(const std::string& type, const std::string& name,
                         int64_t size) const override {
    return absl::StrCat("__shared__ ", type, " ", name, "[", size, "];");
  }
  std::string Barrier() const override { return "__syncthreads();"; }
  std::string HalfHelpers() const override { return kCudaHalf; }
  std::string Bf16Helpers() const override { return kCudaBf16; }
  std::string Wrap(const Signature& sig, const std::string& helpers, const std::string& prologue,
                   const std::string& body) const override {
    int64_t threads = sig.local[0] * sig.local[1] * sig.local[2];
    return absl::StrCat(kCudaPrelude, helpers, "extern \"C\" __global__ void __launch_bounds__(",
                        threads, ") ", sig.name, "(", absl::StrJoin(sig.params, ", "), ") {\n",
                        prologue, body, "}\n");
  }
  std::string DialectName() const override { return "CUDA renderer"; }
};

}  // namespace

std::string RenderCuda(const std::string& name, const UOpList& uops) {
  CudaRenderer r;
  return r.Render(name, uops);
}

}  // namespace kiln
