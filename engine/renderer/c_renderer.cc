// The C dialect of the C-family renderer (engine/renderer/cstyle.h): linear
// UOps -> one C function per kernel, compiled by clang for the CPU device.
// Kernel ABI: void name(void** bufs, const long long* vars, long long start,
// long long end); the parallel RANGE runs [start, end). Vector values use
// clang's ext_vector_type: this dialect overrides the value hooks for
// vectors and leaves scalars to the base. float16 and bfloat16 are stored as
// 16-bit patterns and computed in float, rounded to their type after every
// operation (the interpreter's semantics).
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/renderer/c_helpers.h"
#include "engine/renderer/cstyle.h"
#include "engine/renderer/renderer.h"

namespace kiln {
namespace {

constexpr const char* kHalfHelpers = R"(#ifndef KILN_HALF_HELPERS
#define KILN_HALF_HELPERS
static inline float kiln_h2f(unsigned short h) {
  unsigned int s = (unsigned int)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0) {
    if (m == 0) { x = s; } else { e = 113; while (!(m & 0x400u)) { m <<= 1; e--; } x = s | (e << 23) | ((m & 0x3ffu) << 13); }
  } else if (e == 31) { x = s | 0x7f800000u | (m << 13); } else { x = s | ((e + 112) << 23) | (m << 13); }
  float f; __builtin_memcpy(&f, &x, 4); return f;
}
static inline unsigned short kiln_f2h(float f) {
  unsigned int x; __builtin_memcpy(&x, &f, 4);
  unsigned int s = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 0xff) return (unsigned short)(s | 0x7c00u | (m ? 0x200u | (m >> 13) : 0u));
  int ee = (int)e - 112;
  if (ee >= 31) return (unsigned short)(s | 0x7c00u);
  if (ee <= 0) {
    if (ee < -10) return (unsigned short)s;
    m |= 0x800000u; int sh = 14 - ee;
    unsigned int hm = m >> sh, rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
    if (rem > half || (rem == half && (hm & 1u))) hm++;
    return (unsigned short)(s | hm);
  }
  unsigned int hm = m >> 13, rem = m & 0x1fffu, h = s | ((unsigned int)ee << 10) | hm;
  if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u))) h++;
  return (unsigned short)h;
}
static inline float kiln_rh(float f) { return kiln_h2f(kiln_f2h(f)); }
#endif
)";

constexpr const char* kBf16Helpers = R"(#ifndef KILN_BF16_HELPERS
#define KILN_BF16_HELPERS
static inline float kiln_bf2f(unsigned short b) {
  unsigned int x = (unsigned int)b << 16; float f; __builtin_memcpy(&f, &x, 4); return f;
}
static inline unsigned short kiln_f2bf(float f) {
  unsigned int x; __builtin_memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u); return (unsigned short)(x >> 16);
}
static inline float kiln_rbf(float f) { return kiln_bf2f(kiln_f2bf(f)); }
#endif
)";

bool IsHalfLike(DType t) {
  return t.scalar == ScalarType::kFloat16 || t.scalar == ScalarType::kBFloat16;
}

// Short type names for vector typedefs (kf32x8).
std::string Short(ScalarType s) {
  switch (s) {
    case ScalarType::kBool: return "b";
    case ScalarType::kInt8: return "i8";
    case ScalarType::kInt16: return "i16";
    case ScalarType::kInt32: return "i32";
    case ScalarType::kInt64: return "i64";
    case ScalarType::kUInt8: return "u8";
    case ScalarType::kUInt16: return "u16";
    case ScalarType::kUInt32: return "u32";
    case ScalarType::kUInt64: return "u64";
    case ScalarType::kFloat64: return "f64";
    default: return "f32";
  }
}

class CRenderer : public CStyleRenderer {
 protected:
  // ---- the kernel's interface ----
  void AddBuffer(Signature* /*sig*/, std::string* prologue, int64_t index,
                 const std::string& storage, bool /*read_only*/) override {
    Line(prologue, absl::StrCat(storage, "* restrict data", index, " = (", storage, "*)bufs[",
                                index, "];"));
  }
  void AddVar(Signature* /*sig*/, std::string* prologue, const std::string& name,
              const std::string& type, int index) override {
    Line(prologue, absl::StrCat("const ", type, " ", name, " = (", type, ")vars[", index, "];"));
  }
  std::pair<std::string, std::string> RangeBounds(const UOp& range) override {
    // The parallel loop covers the slice [start, end) the thread pool gives;
    // a segment of it only its part of that slice.
    const std::vector<int64_t>& a = range.arg().Ints();
    const int64_t kind = a.size() > 1 ? a[1] : 0;
    if (kind == kParallelSegment) {
      auto [lo, hi] = CStyleRenderer::RangeBounds(range);
      return {absl::StrCat("(int)(start > ", lo, " ? start : ", lo, ")"),
              absl::StrCat("(int)(end < ", hi, " ? end : ", hi, ")")};
    }
    if (kind) return {"(int)start", "(int)end"};
    return CStyleRenderer::RangeBounds(range);
  }
  std::string Wrap(const Signature& sig, const std::string& helpers, const std::string& prologue,
                   const std::string& body) const override {
    std::string out;
    for (const auto& t : typedefs_) absl::StrAppend(&out, t, "\n");
    absl::StrAppend(&out, helpers);
    for (const auto& h : helpers_) absl::StrAppend(&out, h, "\n");
    absl::StrAppend(&out, "void ", sig.name,
                    "(void** bufs, const long long* vars, long long start, long long end) {\n",
                    prologue, body, "}\n");
    return out;
  }

  // ---- spellings ----
  std::string ScalarC(ScalarType s) const override {
    switch (s) {
      case ScalarType::kBool: return "_Bool";
      case ScalarType::kInt8: return "signed char";
      case ScalarType::kInt16: return "short";
      case ScalarType::kInt32: return "int";
      case ScalarType::kInt64: return "long long";
      case ScalarType::kUInt8: return "unsigned char";
      case ScalarType::kUInt16: return "unsigned short";
      case ScalarType::kUInt32: return "unsigned int";
      case ScalarType::kUInt64: return "unsigned long long";
      case ScalarType::kFloat16: case ScalarType::kBFloat16: case ScalarType::kFloat32: return "float";
      case ScalarType::kFloat64: return "double";
      default: return "void";
    }
  }
  std::string Int64Suffix(bool is_unsigned) const override { return is_unsigned ? "ull" : "ll"; }
  std::string NonFinite(bool is_double, bool nan) const override {
    if (nan) return is_double ? "__builtin_nan(\"\")" : "__builtin_nanf(\"\")";
    return is_double ? "__builtin_inf()" : "__builtin_inff()";
  }
  std::string MathFn(const std::string& fn, bool is_double) const override {
    return absl::StrCat("__builtin_", fn, is_double ? "" : "f");
  }
  std::string Bitcast(const std::string& from, const std::string& to,
                      const std::string& v) const override {
    return absl::StrCat("({", from, " s_ = ", v, "; ", to,
                        " t_; __builtin_memcpy(&t_, &s_, sizeof(t_)); t_;})");
  }
  std::string HalfHelpers() const override { return kHalfHelpers; }
  std::string Bf16Helpers() const override { return kBf16Helpers; }
  std::string DialectName() const override { return "C renderer"; }
  // 64-bit index arithmetic: an int index is sign-extended at every address
  // it forms (-fwrapv); a long long folds into the addressing mode (a 7x7
  // 1x1 convolution's inner loop: 41 -> 17 instructions per 12 FMAs).
  std::string IndexType() const override { return "long long"; }
  // The CPU lowering makes no GPU indices, local memory or barriers.
  std::string BufferParam(const std::string&, const std::string&, bool) const override {
    return NotOnCpu("buffer parameters");
  }
  std::string VarParam(const std::string&) const override { return NotOnCpu("var parameters"); }
  std::string Special(const std::string& name) const override { return NotOnCpu(name); }
  std::string LocalArray(const std::string&, const std::string&, int64_t) const override {
    return NotOnCpu("local memory");
  }
  std::string Barrier() const override { return NotOnCpu("barriers"); }

  // ---- values: vectors here, scalars in the base ----
  // Value type name; registers vector typedefs as needed.
  std::string Type(DType t) override {
    if (t.count == 1) return ScalarC(t.scalar);
    ScalarType s = IsHalfLike(t) ? ScalarType::kFloat32 : t.scalar;
    std::string base = s == ScalarType::kBool ? "unsigned char" : ScalarC(s);
    std::string n = absl::StrCat("k", Short(s), "x", t.count);
    typedefs_.insert(absl::StrCat("typedef ", base, " ", n, " __attribute__((ext_vector_type(",
                                  t.count, ")));"));
    return n;
  }

  // Rounds float-carried half / bfloat16 lanes; bool lanes back to 0 / 1.
  std::string Round(DType t, const std::string& e) override {
    if (t.count == 1) return CStyleRenderer::Round(t, e);
    if (IsHalfLike(t)) {
      bool half = t.scalar == ScalarType::kFloat16;
      (half ? half_ : bf16_) = true;
      const char* fn = half ? "kiln_rh" : "kiln_rbf";
      std::string ty = Type(t);
      std::string name = absl::StrCat(fn, "_", ty);
      AddHelper(name, absl::StrCat("static inline ", ty, " ", name, "(", ty, " v) { ",
                                   "for (int i = 0; i < ", t.count, "; ++i) v[i] = ", fn,
                                   "(v[i]); return v; }"));
      return absl::StrCat(name, "(", e, ")");
    }
    if (t.IsBool()) return absl::StrCat("(__builtin_convertvector((", e, ")!=0, ", Type(t), ")&1)");
    return e;
  }

  std::string Load(const UOp& x) override {
    DType t = x.dtype();
    if (t.count == 1) return CStyleRenderer::Load(x);
    const std::string& buf = E(x.src(0));
    const std::string& idx = E(x.src(1));
    // (Spelled before the masked case, which then does not use it: the
    // typedef / helper it registers are part of the kernels' cache keys.)
    std::string e = IsHalfLike(t)
                        ? absl::StrCat(HalfVecHelper(t, false), "(", buf, "+", idx, ")")
                        : absl::StrCat("(*((", UnalignedPtr(t), "*)(", buf, "+", idx, ")))");
    if (x.src().size() > 2 && x.src(2)->dtype().count > 1) return MaskedLoad(x);
    if (x.src().size() > 2) e = absl::StrCat("(", E(x.src(2)), "?", e, ":", E(x.src(3)), ")");
    return e;
  }

  std::string Store(const UOp& x) override {
    DType t = x.src(2)->dtype();
    if (t.count == 1) return CStyleRenderer::Store(x);
    if (x.src().size() > 3 && x.src(3)->dtype().count > 1) return MaskedStore(x);
    const std::string& buf = E(x.src(0));
    const std::string& idx = E(x.src(1));
    const std::string& v = E(x.src(2));
    std::string s = IsHalfLike(t)
                        ? absl::StrCat(HalfVecHelper(t, true), "(", buf, "+", idx, ", ", v, ");")
                        : absl::StrCat("*((", UnalignedPtr(t), "*)(", buf, "+", idx, ")) = ", v, ";");
    if (x.src().size() > 3) s = absl::StrCat("if (", E(x.src(3)), ") ", s);
    return s;
  }

  std::string Value(const UOp& x) override {
    DType t = x.dtype();
    if (x.op() == Op::kVectorize) return Vectorize(x);
    if (x.op() == Op::kGep) return absl::StrCat(E(x.src(0)), "[", x.arg().Int(), "]");
    if (x.op() == Op::kExp2 && t.count == 1 && t.scalar == ScalarType::kFloat32) {
      AddHelper("kiln_exp2_f32", c_helpers::ScalarExp2("kiln_exp2_f32"));
      return absl::StrCat("kiln_exp2_f32(", E(x.src(0)), ")");
    }
    if (t.count == 1) return CStyleRenderer::Value(x);
    auto src = [&](size_t i) { return E(x.src(i)); };
    bool is_double = t.scalar == ScalarType::kFloat64;
    switch (x.op()) {
      case Op::kCast:
        if (t.IsBool())
          return absl::StrCat("(__builtin_convertvector(", src(0), "!=0, ", Type(t), ")&1)");
        return Round(t, absl::StrCat("__builtin_convertvector(", src(0), ", ", Type(t), ")"));
      case Op::kTrunc:
        return absl::StrCat("__builtin_elementwise_trunc(", src(0), ")");
      case Op::kExp2:
        if (!is_double) return Round(t, VectorExp2(t, src(0)));
        [[fallthrough]];
      case Op::kLog2: case Op::kSin: case Op::kSqrt: {
        const char* fn = x.op() == Op::kExp2 ? "exp2" : x.op() == Op::kLog2 ? "log2"
                       : x.op() == Op::kSin ? "sin" : "sqrt";
        return Round(t, PerLane(t, {src(0)}, [&](const std::vector<std::string>& a) {
          return absl::StrCat(MathFn(fn, is_double), "(", a[0], ")");
        }));
      }
      case Op::kPow:
        return Round(t, PerLane(t, {src(0), src(1)}, [&](const std::vector<std::string>& a) {
          return absl::StrCat(MathFn("pow", is_double), "(", a[0], ",", a[1], ")");
        }));
      case Op::kIDiv: case Op::kMod: {
        const char* op = x.op() == Op::kIDiv ? "/" : "%";
        const UOp& d = *x.src(1);
        if (d.IsConst() && !d.IsConstInt(0) && !d.IsConstInt(-1)) break;  // as scalars
        return PerLane(t, {src(0), src(1)}, [&](const std::vector<std::string>& a) {
          return absl::StrCat("(", a[1], "==0?0:", a[0], op, a[1], ")");
        });
      }
      case Op::kMax:
        return absl::StrCat("__builtin_elementwise_max(", src(0), ",", src(1), ")");
      case Op::kCmpLt: case Op::kCmpNe: case Op::kCmpEq: {
        const char* op = x.op() == Op::kCmpLt ? "<" : x.op() == Op::kCmpNe ? "!=" : "==";
        return absl::StrCat("(__builtin_convertvector(", src(0), op, src(1), ", ", Type(t), ")&1)");
      }
      case Op::kWhere:
        return absl::StrCat("((__builtin_convertvector(", src(0), ", ", MaskType(t), ")!=0)?",
                            src(1), ":", src(2), ")");
      case Op::kMulAcc: {
        if (!t.IsFloat()) break;
        std::string ty = Type(t);
        helpers_.insert(absl::StrCat("#ifndef KILN_FMA_", ty, "\n#define KILN_FMA_", ty,
                                     "\nstatic inline ", ty, " kiln_fma_", ty, "(", ty, " a, ", ty,
                                     " b, ", ty, " c) {\n#pragma clang fp contract(fast)\n",
                                     "  return a*b+c;\n}\n#endif"));
        return Round(t, absl::StrCat("kiln_fma_", ty, "(", src(0), ",", src(1), ",", src(2), ")"));
      }
      default:
        break;
    }
    // Operators that read the same on vectors (+ - * / & | ^ << >>, neg,
    // recip, bitcast, integer mulacc): the base's spelling, rounded per lane.
    return CStyleRenderer::Value(x);
  }

 private:
  std::string NotOnCpu(const std::string& what) const {
    KILN_CHECK(false, "C renderer: no ", what, " on the CPU");
    return "";
  }

  std::string Vectorize(const UOp& x) {
    bool same = true;
    for (const UOpRef& s : x.src()) same &= s == x.src(0);
    if (same) return absl::StrCat("((", Type(x.dtype()), ")(", E(x.src(0)), "))");
    std::vector<std::string> parts;
    for (const UOpRef& s : x.src()) parts.push_back(E(s));
    return absl::StrCat("((", Type(x.dtype()), "){", absl::StrJoin(parts, ", "), "})");
  }

  // Unaligned vector pointer type for loads / stores of storage type.
  std::string UnalignedPtr(DType t) {
    std::string base = StorageC(t.scalar);
    std::string n = absl::StrCat("k", Short(t.scalar), "x", t.count, "u");
    typedefs_.insert(absl::StrCat("typedef ", base, " ", n, " __attribute__((ext_vector_type(",
                                  t.count, "), aligned(", t.ScalarSize(), ")));"));
    return n;
  }

  // Integer mask vector with lanes as wide as t's lanes (for selects).
  std::string MaskType(DType t) {
    int sz = IsHalfLike(t) ? 4 : t.ScalarSize();
    ScalarType s = sz == 1 ? ScalarType::kInt8 : sz == 2 ? ScalarType::kInt16
                 : sz == 4 ? ScalarType::kInt32 : ScalarType::kInt64;
    return Type(DType(s, t.count));
  }

  // Adds a helper function, guarded so that kernels compiled together in one
  // translation unit define it once.
  void AddHelper(const std::string& name, const std::string& body) {
    helpers_.insert(absl::StrCat("#ifndef KILN_H_", name, "\n#define KILN_H_", name, "\n", body,
                                 "\n#endif"));
  }

  // Helper that loads (store = false) or stores a vector of float16 /
  // bfloat16 lanes converted from / to float.
  std::string HalfVecHelper(DType t, bool store) {
    bool half = t.scalar == ScalarType::kFloat16;
    (half ? half_ : bf16_) = true;
    std::string ty = Type(t);
    std::string name = absl::StrCat(store ? "kiln_st" : "kiln_ld", half ? "h_" : "bf_", ty);
    if (store) {
      AddHelper(name, absl::StrCat("static inline void ", name, "(unsigned short* p, ", ty,
                                   " v) { for (int i = 0; i < ", t.count, "; ++i) p[i] = ",
                                   half ? "kiln_f2h" : "kiln_f2bf", "(v[i]); }"));
    } else {
      AddHelper(name, absl::StrCat("static inline ", ty, " ", name,
                                   "(const unsigned short* p) { ", ty, " v; for (int i = 0; i < ",
                                   t.count, "; ++i) v[i] = ", half ? "kiln_h2f" : "kiln_bf2f",
                                   "(p[i]); return v; }"));
    }
    return name;
  }

  // Applies a scalar function lane by lane to a vector operand.
  std::string PerLane(DType t, const std::vector<std::string>& args,
                      const std::function<std::string(const std::vector<std::string>&)>& f) {
    std::vector<std::string> lanes;
    for (int l = 0; l < t.count; ++l) {
      std::vector<std::string> a;
      for (const auto& x : args) a.push_back(absl::StrCat(x, "[", l, "]"));
      lanes.push_back(f(a));
    }
    return absl::StrCat("((", Type(t), "){", absl::StrJoin(lanes, ", "), "})");
  }

  // Element `i` of buffer `buf` at `idx` as a value (scalar load conversion).
  std::string Elem(DType t, const std::string& buf, const std::string& idx, const std::string& i) {
    std::string raw = absl::StrCat(buf, "[", idx, "+", i, "]");
    if (t.scalar == ScalarType::kFloat16) return half_ = true, absl::StrCat("kiln_h2f(", raw, ")");
    if (t.scalar == ScalarType::kBFloat16) return bf16_ = true, absl::StrCat("kiln_bf2f(", raw, ")");
    if (t.IsBool()) return absl::StrCat("(", raw, "!=0)");
    return raw;
  }

  // 4-byte lanes, 4, 8 or 16 of them: AVX / AVX-512 masked loads / stores
  // (which do not touch the memory of masked-off lanes), engine/renderer/c_helpers.h.
  static bool AvxMaskable(DType t) {
    return !IsHalfLike(t) && t.ScalarSize() == 4 && (t.count == 4 || t.count == 8 || t.count == 16);
  }
  c_helpers::MaskedTypes Masked(DType t, DType gate) {
    return {t.count, Type(t), Type(gate), Type(DType(ScalarType::kFloat32, t.count)),
            Type(DType(ScalarType::kInt32, t.count)), UnalignedPtr(t), StorageC(t.scalar)};
  }

  // exp2 of float lanes without a libm call per lane (c_helpers::Exp2).
  std::string VectorExp2(DType t, const std::string& x) {
    std::string ty = Type(DType(ScalarType::kFloat32, t.count));
    std::string name = absl::StrCat("kiln_exp2_", ty);
    AddHelper(name, c_helpers::Exp2(name, ty, Type(DType(ScalarType::kInt32, t.count)), t.count));
    return absl::StrCat(name, "(", x, ")");
  }

  // A vector load with a gate per lane: lane i reads buf[idx+i] only where
  // the gate is set, else it takes the alternative's lane.
  std::string MaskedLoad(const UOp& x) {
    const std::string &buf = E(x.src(0)), &idx = E(x.src(1)), &g = E(x.src(2)), &alt = E(x.src(3));
    DType t = x.dtype();
    std::string ty = Type(t);
    if (AvxMaskable(t)) {
      std::string name = absl::StrCat("kiln_mload_", ty);
      AddHelper(name, c_helpers::MaskedLoad(name, Masked(t, x.src(2)->dtype())));
      return absl::StrCat(name, "(", buf, "+", idx, ", ", g, ", ", alt, ")");
    }
    return absl::StrCat("({", ty, " r_ = ", alt, "; for (int i_ = 0; i_ < ", t.count,
                        "; ++i_) if ((", g, ")[i_]) r_[i_] = ", Elem(t, buf, idx, "i_"),
                        "; r_;})");
  }

  // A vector store with a gate per lane: only the lanes whose gate is set
  // are written.
  std::string MaskedStore(const UOp& x) {
    const std::string &buf = E(x.src(0)), &idx = E(x.src(1)), &v = E(x.src(2)), &g = E(x.src(3));
    DType t = x.src(2)->dtype();
    if (AvxMaskable(t)) {
      std::string name = absl::StrCat("kiln_mstore_", Type(t));
      AddHelper(name, c_helpers::MaskedStore(name, Masked(t, x.src(3)->dtype())));
      return absl::StrCat(name, "(", buf, "+", idx, ", ", g, ", ", v, ");");
    }
    std::string lane = absl::StrCat("(", v, ")[i_]");
    if (t.scalar == ScalarType::kFloat16) half_ = true, lane = absl::StrCat("kiln_f2h(", lane, ")");
    if (t.scalar == ScalarType::kBFloat16) bf16_ = true, lane = absl::StrCat("kiln_f2bf(", lane, ")");
    return absl::StrCat("for (int i_ = 0; i_ < ", t.count, "; ++i_) if ((", g, ")[i_]) ", buf, "[",
                        idx, "+i_] = ", lane, ";");
  }

  std::set<std::string> typedefs_;
  std::set<std::string> helpers_;
};

}  // namespace

std::string RenderC(const std::string& name, const UOpList& uops) {
  CRenderer r;
  return r.Render(name, uops);
}

}  // namespace kiln
