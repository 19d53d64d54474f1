#include "engine/renderer/c_helpers.h"

#include "absl/strings/str_cat.h"

namespace kiln::c_helpers {
namespace {

// Start of an `if` that holds when every lane of bool vector `g` (0 / 1
// lanes) is set: the common case of a masked tail or border, taken as a
// plain vector access (a predictable branch beats a masked move + blend).
std::string AllLanes(int lanes) {
  if (lanes == 16)
    return "  unsigned long long all_[2]; __builtin_memcpy(all_, &g, sizeof(all_));\n"
           "  if (all_[0] == 0x0101010101010101ull && all_[1] == 0x0101010101010101ull)\n";
  const char* ut = lanes == 8 ? "unsigned long long" : "unsigned int";
  const char* ones = lanes == 8 ? "0x0101010101010101ull" : "0x01010101u";
  return absl::StrCat("  ", ut, " all_; __builtin_memcpy(&all_, &g, sizeof(all_));\n",
                      "  if (all_ == ", ones, ")\n");
}

// AVX-512 masked moves of 16 lanes take a 16-bit lane mask k. The helpers
// are kept in a sorted set, so each one that needs kiln_v16sf declares it.
constexpr const char* kV16sf =
    "#ifndef KILN_V16SF\n#define KILN_V16SF\n"
    "typedef float kiln_v16sf __attribute__((__vector_size__(64)));\n#endif\n";
constexpr const char* kV8sf =
    "#ifndef KILN_V8SF\n#define KILN_V8SF\n"
    "typedef float kiln_v8sf __attribute__((__vector_size__(32)));\n#endif\n";
constexpr const char* kLaneMask16 =
    "  unsigned short k = 0;\n"
    "  for (int i = 0; i < 16; ++i) k |= (unsigned short)((g[i] != 0) << i);\n";

}  // namespace

std::string Exp2(const std::string& name, const std::string& ty, const std::string& it, int lanes) {
  // x = n + f with n an integer and |f| <= 1/2; 2^n from exponent bits in
  // two halves, so results down to 2^-252 are built without overflowing the
  // exponent (denormals and 0 come out of the multiply). The polynomial is
  // evaluated with FMAs (kernels are compiled with -ffp-contract=off).
  // AVX-512 scales by 2^n in one instruction (vscalefps, exact over the
  // same range): a SiLU over 96 x 112 x 112 lanes 405 -> 297 us.
  const std::string poly = absl::StrCat(
      "  ", ty, " f = c - n;\n", "  ", ty,
      " p = ((((1.535336188319500e-4f*f + 1.339887440266574e-3f)*f + ",
      "9.618437357674640e-3f)*f + 5.550332471162809e-2f)*f + 2.402264791363012e-1f)*f + ",
      "6.931472028550421e-1f;\n", "  p = 1.0f + f*p;\n");
  const std::string halves = absl::StrCat(
      "  ", ty, " n = __builtin_elementwise_floor(c + 0.5f);\n", poly, "  ", it,
      " ni = __builtin_convertvector(n, ", it, ");\n", "  ", it,
      " n1 = ni >> 1, n2 = ni - n1;\n", "  ", ty, " r = p * (", ty, ")((n1 + 127) << 23) * (",
      ty, ")((n2 + 127) << 23);\n");
  std::string body = halves;
  if (lanes == 16 || lanes == 8) {
    const bool wide = lanes == 16;
    const std::string vt = wide ? "kiln_v16sf" : "kiln_v8sf";
    body = absl::StrCat(
        wide ? "#if defined(__AVX512F__)\n" : "#if defined(__AVX512F__) && defined(__AVX512VL__)\n",
        "  ", ty, " n = __builtin_elementwise_roundeven(c);\n", poly, "  ", ty, " r = (", ty,
        ")__builtin_ia32_scalefps", wide ? "512" : "256", "_mask((", vt, ")p, (", vt, ")n, (", vt,
        ")p, (", wide ? "unsigned short" : "unsigned char", ")-1", wide ? ", 4" : "", ");\n",
        "#else\n", halves, "#endif\n");
  }
  return absl::StrCat(
      lanes == 16 ? kV16sf : lanes == 8 ? kV8sf : "", "static inline ", ty, " ", name, "(", ty,
      " x) {\n", "#pragma clang fp contract(fast)\n", "  ", ty,
      " c = __builtin_elementwise_min(__builtin_elementwise_max(x, (", ty, ")(-252.0f)), (", ty,
      ")(254.0f));\n", body, "  return (x != x) ? x : r;\n}");
}

std::string ScalarExp2(const std::string& name) {
  return absl::StrCat(
      "static inline float ", name, "(float x) {\n",
      "#pragma clang fp contract(fast)\n",
      "  float c = x < -252.0f ? -252.0f : (x > 254.0f ? 254.0f : x);\n",
      "  float n = __builtin_floorf(c + 0.5f);\n",
      "  float f = c - n;\n",
      "  float p = ((((1.535336188319500e-4f*f + 1.339887440266574e-3f)*f + ",
      "9.618437357674640e-3f)*f + 5.550332471162809e-2f)*f + 2.402264791363012e-1f)*f + ",
      "6.931472028550421e-1f;\n",
      "  p = 1.0f + f*p;\n",
      "  if (x != x) return x;\n",
      "  int ni = (int)n, n1 = ni >> 1, n2 = ni - n1;\n",
      "  unsigned b1 = (unsigned)(n1 + 127) << 23, b2 = (unsigned)(n2 + 127) << 23;\n",
      "  float s1, s2;\n",
      "  __builtin_memcpy(&s1, &b1, 4);\n",
      "  __builtin_memcpy(&s2, &b2, 4);\n",
      "  return p * s1 * s2;\n}");
}

std::string MaskedLoad(const std::string& name, const MaskedTypes& t) {
  std::string head = absl::StrCat("static inline ", t.vec, " ", name, "(const void* p, ", t.gate,
                                  " g, ", t.vec, " alt) {\n", AllLanes(t.lanes),
                                  "    return *(const ", t.unaligned, "*)p;\n");
  std::string loop = absl::StrCat("  for (int i = 0; i < ", t.lanes, "; ++i) if (g[i]) v[i] = ((const ",
                                  t.scalar, "*)p)[i];\n");
  if (t.lanes == 16)
    return absl::StrCat(
        kV16sf, head, "#if defined(__AVX512F__)\n", kLaneMask16,
        "  return (", t.vec, ")__builtin_ia32_loadups512_mask((const float*)p, (kiln_v16sf)alt, k);\n",
        "#else\n", "  ", t.vec, " v = alt;\n", loop, "  return v;\n", "#endif\n}");
  const char* b = t.lanes == 8 ? "__builtin_ia32_maskloadps256" : "__builtin_ia32_maskloadps";
  return absl::StrCat(head, "  ", t.ivec, " m = -__builtin_convertvector(g, ", t.ivec, ");\n",
                      "#if defined(__AVX__)\n", "  ", t.vec, " v = (", t.vec, ")", b, "((const ",
                      t.fvec, "*)p, m);\n", "#else\n", "  ", t.vec, " v = alt;\n", loop,
                      "#endif\n", "  return (m != 0) ? v : alt;\n}");
}

std::string MaskedStore(const std::string& name, const MaskedTypes& t) {
  std::string head = absl::StrCat("static inline void ", name, "(void* p, ", t.gate, " g, ", t.vec,
                                  " v) {\n", AllLanes(t.lanes), "    { *(", t.unaligned,
                                  "*)p = v; return; }\n");
  std::string loop = absl::StrCat("  for (int i = 0; i < ", t.lanes, "; ++i) if (g[i]) ((", t.scalar,
                                  "*)p)[i] = v[i];\n");
  if (t.lanes == 16)
    return absl::StrCat(kV16sf, head, "#if defined(__AVX512F__)\n", kLaneMask16,
                        "  __builtin_ia32_storeups512_mask((float*)p, (kiln_v16sf)v, k);\n",
                        "#else\n", loop, "#endif\n}");
  const char* b = t.lanes == 8 ? "__builtin_ia32_maskstoreps256" : "__builtin_ia32_maskstoreps";
  return absl::StrCat(head, "#if defined(__AVX__)\n", "  ", b, "((", t.fvec,
                      "*)p, -__builtin_convertvector(g, ", t.ivec, "), (", t.fvec, ")v);\n",
                      "#else\n", loop, "#endif\n}");
}

}  // namespace kiln::c_helpers
