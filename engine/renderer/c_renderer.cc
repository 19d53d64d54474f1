// The C renderer: linear UOps -> one C function per kernel (compiled by clang
// for the CPU device). Vector values use clang's ext_vector_type; float16 and
// bfloat16 are stored as 16-bit patterns and computed in float, rounded to
// their type after every operation (the interpreter's semantics).
#include <cmath>
#include <functional>
#include <limits>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/renderer/c_helpers.h"
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

// C type of a scalar value (float16 / bfloat16 computed as float).
std::string ScalarC(ScalarType s) {
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

// C type of a buffer element in memory.
std::string StorageC(ScalarType s) {
  if (s == ScalarType::kFloat16 || s == ScalarType::kBFloat16) return "unsigned short";
  if (s == ScalarType::kBool) return "unsigned char";
  return ScalarC(s);
}

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

class CRenderer {
 public:
  std::string Render(const std::string& name, const UOpList& uops) {
    for (const UOpRef& u : uops)
      for (const UOpRef& s : u->src()) uses_[s.get()]++;
    std::string params, body;
    int var_index = 0;
    indent_ = 1;
    for (const UOpRef& u : uops) {
      const UOp& x = *u;
      switch (x.op()) {
        case Op::kDefineGlobal: {
          std::string n = absl::StrCat("data", x.arg().Int());
          absl::StrAppend(&params, "  ", StorageC(x.dtype().scalar), "* restrict ", n, " = (",
                          StorageC(x.dtype().scalar), "*)bufs[", x.arg().Int(), "];\n");
          expr_[&x] = n;
          break;
        }
        case Op::kDefineVar:
          absl::StrAppend(&params, "  const ", ScalarC(x.dtype().scalar), " ", x.arg().Str(),
                          " = (", ScalarC(x.dtype().scalar), ")vars[", var_index++, "];\n");
          expr_[&x] = x.arg().Str();
          break;
        case Op::kConst: expr_[&x] = Literal(x); break;
        case Op::kRange: {
          std::string n = absl::StrCat("ridx", x.arg().Ints()[0]);
          bool par = x.arg().Ints().size() > 1 && x.arg().Ints()[1];
          std::string lo = par ? "(int)start" : E(x.src(0));
          std::string hi = par ? "(int)end" : E(x.src(1));
          Line(&body, absl::StrCat("for (int ", n, " = ", lo, "; ", n, " < ", hi, "; ", n, "++) {"));
          ++indent_;
          expr_[&x] = n;
          break;
        }
        case Op::kEndRange:
          --indent_;
          Line(&body, "}");
          break;
        case Op::kDefineAcc: {
          std::string n = absl::StrCat("acc", x.arg().Int());
          Line(&body, absl::StrCat(Type(x.dtype()), " ", n, " = ", E(x.src(0)), ";"));
          expr_[&x] = n;
          break;
        }
        case Op::kAssign:
          Line(&body, absl::StrCat(E(x.src(0)), " = ", E(x.src(1)), ";"));
          expr_[&x] = E(x.src(0));
          break;
        case Op::kStore: Line(&body, Store(x)); break;
        default: {
          std::string e = Value(x);
          bool inline_ok = x.op() != Op::kLoad && x.dtype().count == 1 && uses_[&x] <= 1 &&
                           x.op() != Op::kBitcast;
          if (inline_ok) {
            expr_[&x] = e;
          } else {
            std::string n = absl::StrCat(x.op() == Op::kLoad ? "val" : "alu", tmp_++);
            Line(&body, absl::StrCat(Type(x.dtype()), " ", n, " = ", e, ";"));
            expr_[&x] = n;
          }
        }
      }
    }
    std::string out;
    for (const auto& t : typedefs_) absl::StrAppend(&out, t, "\n");
    if (half_) absl::StrAppend(&out, kHalfHelpers);
    if (bf16_) absl::StrAppend(&out, kBf16Helpers);
    for (const auto& h : helpers_) absl::StrAppend(&out, h, "\n");
    absl::StrAppend(&out, "void ", name,
                    "(void** bufs, const long long* vars, long long start, long long end) {\n",
                    params, body, "}\n");
    return out;
  }

 private:
  void Line(std::string* out, const std::string& s) {
    absl::StrAppend(out, std::string(2 * indent_, ' '), s, "\n");
  }

  const std::string& E(const UOpRef& u) {
    auto it = expr_.find(u.get());
    KILN_CHECK(it != expr_.end(), "C renderer: undefined ", u->Describe());
    return it->second;
  }

  // Value type name; registers vector typedefs as needed.
  std::string Type(DType t) {
    if (t.count == 1) return ScalarC(t.scalar);
    ScalarType s = IsHalfLike(t) ? ScalarType::kFloat32 : t.scalar;
    std::string base = s == ScalarType::kBool ? "unsigned char" : ScalarC(s);
    std::string n = absl::StrCat("k", Short(s), "x", t.count);
    typedefs_.insert(absl::StrCat("typedef ", base, " ", n, " __attribute__((ext_vector_type(",
                                  t.count, ")));"));
    return n;
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

  std::string Literal(const UOp& c) {
    DType t = c.dtype();
    ConstValue v = c.const_value();
    if (const auto* i = std::get_if<int64_t>(&v)) {
      // Negative literals are parenthesized so that "-" + literal never
      // reads as "--".
      auto paren = [&](std::string x) { return *i < 0 ? absl::StrCat("(", x, ")") : x; };
      switch (t.scalar) {
        case ScalarType::kInt64:
          return *i == std::numeric_limits<int64_t>::min() ? "(-9223372036854775807ll-1)"
                                                           : paren(absl::StrCat(*i, "ll"));
        case ScalarType::kUInt64: return absl::StrCat(static_cast<uint64_t>(*i), "ull");
        case ScalarType::kUInt32: return absl::StrCat(*i, "u");
        case ScalarType::kInt32:
          return *i == -2147483648LL ? "(-2147483647-1)" : paren(absl::StrCat(*i));
        default: return paren(absl::StrCat(*i));
      }
    }
    double d = std::get<double>(v);
    bool dbl = t.scalar == ScalarType::kFloat64;
    if (std::isnan(d)) return dbl ? "__builtin_nan(\"\")" : "__builtin_nanf(\"\")";
    if (std::isinf(d))
      return absl::StrCat(d < 0 ? "(-" : "(", dbl ? "__builtin_inf()" : "__builtin_inff()", ")");
    char buf[64];
    std::snprintf(buf, sizeof(buf), dbl ? "%.17g" : "%.9g", d);
    std::string s = buf;
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
    if (!dbl) s += "f";
    return std::signbit(d) ? absl::StrCat("(", s, ")") : s;
  }

  // Rounds a float-carried half / bfloat16 result; wraps a scalar integer
  // result narrower than int (C computes those in int) back to its type.
  std::string Round(DType t, const std::string& e) {
    if (IsHalfLike(t)) {
      bool half = t.scalar == ScalarType::kFloat16;
      (half ? half_ : bf16_) = true;
      const char* fn = half ? "kiln_rh" : "kiln_rbf";
      if (t.count == 1) return absl::StrCat(fn, "(", e, ")");
      std::string ty = Type(t);
      std::string name = absl::StrCat(fn, "_", ty);
      AddHelper(name, absl::StrCat("static inline ", ty, " ", name, "(", ty, " v) { ",
                                   "for (int i = 0; i < ", t.count, "; ++i) v[i] = ", fn,
                                   "(v[i]); return v; }"));
      return absl::StrCat(name, "(", e, ")");
    }
    if (t.count == 1 && (t.IsInt() || t.IsBool()) && t.ScalarSize() < 4)
      return absl::StrCat("((", ScalarC(t.scalar), ")", e, ")");
    if (t.count > 1 && t.IsBool())  // lanes back to 0 / 1
      return absl::StrCat("(__builtin_convertvector((", e, ")!=0, ", Type(t), ")&1)");
    return e;
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

  std::string Load(const UOp& x) {
    const std::string& buf = E(x.src(0));
    const std::string& idx = E(x.src(1));
    DType t = x.dtype();
    std::string e;
    if (t.count == 1) {
      std::string raw = absl::StrCat(buf, "[", idx, "]");
      if (t.scalar == ScalarType::kFloat16) half_ = true, e = absl::StrCat("kiln_h2f(", raw, ")");
      else if (t.scalar == ScalarType::kBFloat16) bf16_ = true, e = absl::StrCat("kiln_bf2f(", raw, ")");
      else if (t.IsBool()) e = absl::StrCat("(", raw, "!=0)");
      else e = raw;
    } else if (IsHalfLike(t)) {
      e = absl::StrCat(HalfVecHelper(t, false), "(", buf, "+", idx, ")");
    } else {
      e = absl::StrCat("(*((", UnalignedPtr(t), "*)(", buf, "+", idx, ")))");
    }
    if (x.src().size() > 2 && x.src(2)->dtype().count > 1) return MaskedLoad(x);
    if (x.src().size() > 2) e = absl::StrCat("(", E(x.src(2)), "?", e, ":", E(x.src(3)), ")");
    return e;
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
    AddHelper(name, c_helpers::Exp2(name, ty, Type(DType(ScalarType::kInt32, t.count))));
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

  std::string Store(const UOp& x) {
    const std::string& buf = E(x.src(0));
    const std::string& idx = E(x.src(1));
    const std::string& v = E(x.src(2));
    DType t = x.src(2)->dtype();
    if (x.src().size() > 3 && x.src(3)->dtype().count > 1) return MaskedStore(x);
    std::string s;
    if (t.count == 1) {
      std::string val = v;
      if (t.scalar == ScalarType::kFloat16) half_ = true, val = absl::StrCat("kiln_f2h(", v, ")");
      if (t.scalar == ScalarType::kBFloat16) bf16_ = true, val = absl::StrCat("kiln_f2bf(", v, ")");
      s = absl::StrCat(buf, "[", idx, "] = ", val, ";");
    } else if (IsHalfLike(t)) {
      s = absl::StrCat(HalfVecHelper(t, true), "(", buf, "+", idx, ", ", v, ");");
    } else {
      s = absl::StrCat("*((", UnalignedPtr(t), "*)(", buf, "+", idx, ")) = ", v, ";");
    }
    if (x.src().size() > 3) s = absl::StrCat("if (", E(x.src(3)), ") ", s);
    return s;
  }

  std::string Value(const UOp& x) {
    DType t = x.dtype();
    auto src = [&](size_t i) { return E(x.src(i)); };
    bool vec = t.count > 1;
    bool is_double = t.scalar == ScalarType::kFloat64;
    std::string fs = is_double ? "" : "f";  // libm suffix
    auto bin = [&](const char* op) { return absl::StrCat("(", src(0), op, src(1), ")"); };
    switch (x.op()) {
      case Op::kLoad: return Load(x);
      case Op::kVectorize: {
        bool same = true;
        for (const UOpRef& s : x.src()) same &= s == x.src(0);
        if (same) return absl::StrCat("((", Type(t), ")(", src(0), "))");
        std::vector<std::string> parts;
        for (size_t i = 0; i < x.src().size(); ++i) parts.push_back(src(i));
        return absl::StrCat("((", Type(t), "){", absl::StrJoin(parts, ", "), "})");
      }
      case Op::kGep: return absl::StrCat(src(0), "[", x.arg().Int(), "]");
      case Op::kCast: {
        DType from = x.src(0)->dtype();
        if (t.IsBool()) {
          if (!vec) return absl::StrCat("(", src(0), "!=0)");
          return absl::StrCat("(__builtin_convertvector(", src(0), "!=0, ", Type(t), ")&1)");
        }
        std::string e = vec ? absl::StrCat("__builtin_convertvector(", src(0), ", ", Type(t), ")")
                            : absl::StrCat("((", Type(t), ")(", src(0), "))");
        (void)from;
        return Round(t, e);
      }
      case Op::kBitcast: {
        DType from = x.src(0)->dtype();
        std::string ft = IsHalfLike(from) ? "unsigned short" : Type(from);
        std::string tt = IsHalfLike(t) ? "unsigned short" : Type(t);
        std::string sv = src(0);
        if (from.scalar == ScalarType::kFloat16) half_ = true, sv = absl::StrCat("kiln_f2h(", sv, ")");
        if (from.scalar == ScalarType::kBFloat16) bf16_ = true, sv = absl::StrCat("kiln_f2bf(", sv, ")");
        std::string e = absl::StrCat("({", ft, " s_ = ", sv, "; ", tt,
                                     " t_; __builtin_memcpy(&t_, &s_, sizeof(t_)); t_;})");
        if (t.scalar == ScalarType::kFloat16) half_ = true, e = absl::StrCat("kiln_h2f(", e, ")");
        if (t.scalar == ScalarType::kBFloat16) bf16_ = true, e = absl::StrCat("kiln_bf2f(", e, ")");
        return e;
      }
      case Op::kNeg: return Round(t, absl::StrCat("(-(", src(0), "))"));
      case Op::kRecip:
        return Round(t, absl::StrCat("(", is_double ? "1.0" : "1.0f", "/", src(0), ")"));
      case Op::kExp2: case Op::kLog2: case Op::kSin: case Op::kSqrt: case Op::kTrunc: {
        const char* fn = x.op() == Op::kExp2 ? "exp2" : x.op() == Op::kLog2 ? "log2"
                       : x.op() == Op::kSin ? "sin" : x.op() == Op::kSqrt ? "sqrt" : "trunc";
        if (vec && x.op() == Op::kTrunc) return absl::StrCat("__builtin_elementwise_trunc(", src(0), ")");
        if (vec && x.op() == Op::kExp2 && !is_double) return Round(t, VectorExp2(t, src(0)));
        if (vec) return Round(t, PerLane(t, {src(0)}, [&](const std::vector<std::string>& a) {
          return absl::StrCat("__builtin_", fn, fs, "(", a[0], ")");
        }));
        return Round(t, absl::StrCat("__builtin_", fn, fs, "(", src(0), ")"));
      }
      case Op::kPow:
        if (vec) {
          return Round(t, PerLane(t, {src(0), src(1)}, [&](const std::vector<std::string>& a) {
            return absl::StrCat("__builtin_pow", fs, "(", a[0], ",", a[1], ")");
          }));
        }
        return Round(t, absl::StrCat("__builtin_pow", fs, "(", src(0), ",", src(1), ")"));
      case Op::kAdd: return Round(t, bin("+"));
      case Op::kSub: return Round(t, bin("-"));
      case Op::kMul: return Round(t, bin("*"));
      case Op::kFDiv: return Round(t, bin("/"));
      case Op::kIDiv: case Op::kMod: {
        const char* op = x.op() == Op::kIDiv ? "/" : "%";
        const UOp& d = *x.src(1);
        bool safe = d.IsConst() && !d.IsConstInt(0) && !d.IsConstInt(-1);
        if (safe) return Round(t, bin(op));
        if (vec) return PerLane(t, {src(0), src(1)}, [&](const std::vector<std::string>& a) {
          return absl::StrCat("(", a[1], "==0?0:", a[0], op, a[1], ")");
        });
        if (t.IsUnsigned())
          return Round(t, absl::StrCat("(", src(1), "==0?0:", src(0), op, src(1), ")"));
        std::string neg = x.op() == Op::kIDiv ? absl::StrCat("-(", src(0), ")") : "0";
        return Round(t, absl::StrCat("(", src(1), "==0?0:(", src(1), "==-1?", neg, ":", src(0), op,
                                     src(1), "))"));
      }
      case Op::kMax:
        if (vec) return absl::StrCat("__builtin_elementwise_max(", src(0), ",", src(1), ")");
        return absl::StrCat("((", src(0), ")>(", src(1), ")?(", src(0), "):(", src(1), "))");
      case Op::kCmpLt: case Op::kCmpNe: case Op::kCmpEq: {
        const char* op = x.op() == Op::kCmpLt ? "<" : x.op() == Op::kCmpNe ? "!=" : "==";
        if (!vec) return bin(op);
        return absl::StrCat("(__builtin_convertvector(", src(0), op, src(1), ", ", Type(t), ")&1)");
      }
      case Op::kAnd: return Round(t, bin("&"));
      case Op::kOr: return Round(t, bin("|"));
      case Op::kXor: return Round(t, bin("^"));
      case Op::kShl: case Op::kShr: {
        int bits = t.ScalarSize() * 8;
        return Round(t, absl::StrCat("(", src(0), x.op() == Op::kShl ? "<<" : ">>", "((", src(1),
                                     ")&", bits - 1, "))"));
      }
      case Op::kWhere:
        if (!vec) return absl::StrCat("(", src(0), "?", src(1), ":", src(2), ")");
        return absl::StrCat("((__builtin_convertvector(", src(0), ", ", MaskType(t), ")!=0)?",
                            src(1), ":", src(2), ")");
      case Op::kMulAcc: {
        if (!t.IsFloat())
          return Round(t, absl::StrCat("((", src(0), "*", src(1), ")+", src(2), ")"));
        if (!vec) return Round(t, absl::StrCat("__builtin_fma", fs, "(", src(0), ",", src(1), ",", src(2), ")"));
        std::string ty = Type(t);
        helpers_.insert(absl::StrCat("#ifndef KILN_FMA_", ty, "\n#define KILN_FMA_", ty,
                                     "\nstatic inline ", ty, " kiln_fma_", ty, "(", ty, " a, ", ty,
                                     " b, ", ty, " c) {\n#pragma clang fp contract(fast)\n",
                                     "  return a*b+c;\n}\n#endif"));
        return Round(t, absl::StrCat("kiln_fma_", ty, "(", src(0), ",", src(1), ",", src(2), ")"));
      }
      default:
        KILN_CHECK(false, "C renderer: cannot render ", x.Describe());
    }
    return "";
  }

  std::unordered_map<const UOp*, std::string> expr_;
  std::unordered_map<const UOp*, int> uses_;
  std::set<std::string> typedefs_;
  std::set<std::string> helpers_;
  bool half_ = false, bf16_ = false;
  int indent_ = 1;
  int tmp_ = 0;
};

}  // namespace

std::string RenderC(const std::string& name, const UOpList& uops) {
  CRenderer r;
  return r.Render(name, uops);
}

}  // namespace kiln
