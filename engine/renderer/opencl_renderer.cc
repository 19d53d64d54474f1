// The OpenCL C dialect of the C-family renderer (OpenCL C 1.2, built by the
// platform's compiler: PoCL in CI). Grid indices are get_group_id /
// get_local_id; kernels carry reqd_work_group_size; float64 enables
// cl_khr_fp64; float16 / bfloat16 conversions are integer arithmetic (no
// cl_khr_fp16 needed), bit for bit those of the C renderer.
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/renderer/cstyle.h"
#include "engine/renderer/renderer.h"

namespace kiln {
namespace {

constexpr const char* kClHalf = R"(static inline float kiln_h2f(ushort h) {
  uint s = (uint)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0) {
    if (m == 0) {
      x = s;
    } else {
      e = 113;
      while (!(m & 0x400u)) { m <<= 1; e--; }
      x = s | (e << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (e == 31) {
    x = s | 0x7f800000u | (m << 13);
  } else {
    x = s | ((e + 112) << 23) | (m << 13);
  }
  return as_float(x);
}
static inline ushort kiln_f2h(float f) {
  uint x = as_uint(f);
  uint s = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 0xff) return (ushort)(s | 0x7c00u | (m ? 0x200u | (m >> 13) : 0u));
  int ee = (int)e - 112;
  if (ee >= 31) return (ushort)(s | 0x7c00u);
  if (ee <= 0) {
    if (ee < -10) return (ushort)s;
    m |= 0x800000u; int sh = 14 - ee;
    uint hm = m >> sh, rem = m & ((1u << sh) - 1), hw = 1u << (sh - 1);
    if (rem > hw || (rem == hw && (hm & 1u))) hm++;
    return (ushort)(s | hm);
  }
  uint hm = m >> 13, rem = m & 0x1fffu, h = s | ((uint)ee << 10) | hm;
  if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u))) h++;
  return (ushort)h;
}
static inline float kiln_rh(float f) { return kiln_h2f(kiln_f2h(f)); }
)";

constexpr const char* kClBf16 =
    R"(static inline float kiln_bf2f(ushort b) { return as_float((uint)b << 16); }
static inline ushort kiln_f2bf(float f) {
  uint x = as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (ushort)(x >> 16);
}
static inline float kiln_rbf(float f) { return kiln_bf2f(kiln_f2bf(f)); }
)";

class OpenClRenderer : public CStyleRenderer {
 protected:
  std::string ScalarC(ScalarType s) const override {
    switch (s) {
      case ScalarType::kBool:
        return "bool";
      case ScalarType::kInt8:
        return "char";
      case ScalarType::kInt16:
        return "short";
      case ScalarType::kInt32:
        return "int";
      case ScalarType::kInt64:
        return "long";
      case ScalarType::kUInt8:
        return "uchar";
      case ScalarType::kUInt16:
        return "ushort";
      case ScalarType::kUInt32:
        return "uint";
      case ScalarType::kUInt64:
        return "ulong";
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
    return absl::StrCat("__global ", read_only ? "const " : "", storage, "* restrict ", name);
  }
  std::string VarParam(const std::string& name) const override {
    return absl::StrCat("long ", name);
  }
  std::string Special(const std::string& name) const override {
    return absl::StrCat("(int)", name[0] == 'g' ? "get_group_id(" : "get_local_id(",
                        name.substr(4, 1), ")");
  }
  std::string Int64Suffix(bool is_unsigned) const override {
    return is_unsigned ? "UL" : "L";
  }
  std::string NonFinite(bool is_double, bool nan) const override {
    if (is_double)
      return nan ? "as_double(0x7ff8000000000000UL)" : "as_double(0x7ff0000000000000UL)";
    return nan ? "as_float(0x7fc00000u)" : "as_float(0x7f800000u)";
  }
  std::string MathFn(const std::string& fn, bool /*is_double*/) const override { return fn; }
  std::string Convert(DType from, DType to, const std::string& ty,
                      const std::string& v) const override {
    // convert_T_sat: round toward zero, saturate, NaN -> 0.
    if (from.IsFloat() && to.IsInt()) return absl::StrCat("convert_", ty, "_sat(", v, ")");
    return absl::StrCat("((", ty, ")(", v, "))");
  }
  std::string Bitcast(const std::string& /*from*/, const std::string& to,
                      const std::string& v) const override {
    return absl::StrCat("as_", to, "(", v, ")");
  }
  std::string LocalArray(const std::string& type, const std::string& name,
                         int64_t size) const override {
    return absl::StrCat("__local ", type, " ", name, "[", size, "];");
  }
  std::string Barrier() const override { return "barrier(CLK_LOCAL_MEM_FENCE);"; }
  std::string HalfHelpers() const override { return kClHalf; }
  std::string Bf16Helpers() const override { return kClBf16; }
  std::string Wrap(const Signature& sig, const std::string& helpers, const std::string& prologue,
                   const std::string& body) const override {
    return absl::StrCat(sig.uses_double ? "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" : "",
                        helpers, "__kernel __attribute__((reqd_work_group_size(", sig.local[0], ",",
                        sig.local[1], ",", sig.local[2], "))) void ", sig.name, "(",
                        absl::StrJoin(sig.params, ", "), ") {\n", prologue, body, "}\n");
  }
  std::string DialectName() const override { return "OpenCL renderer"; }
};

}  // namespace

std::string RenderOpenCL(const std::string& name, const UOpList& uops) {
  OpenClRenderer r;
  return r.Render(name, uops);
}

}  // namespace kiln
