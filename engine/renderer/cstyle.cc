#include "engine/renderer/cstyle.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"

namespace kiln {
namespace {

bool IsHalfLike(DType t) {
  return t.scalar == ScalarType::kFloat16 || t.scalar == ScalarType::kBFloat16;
}

}  // namespace

std::string CStyleRenderer::StorageC(ScalarType s) const {
  if (s == ScalarType::kFloat16 || s == ScalarType::kBFloat16) return ScalarC(ScalarType::kUInt16);
  if (s == ScalarType::kBool) return ScalarC(ScalarType::kUInt8);
  return ScalarC(s);
}

std::string CStyleRenderer::Render(const std::string& name, const UOpList& uops) {
  std::set<int64_t> stored;
  for (const UOpRef& u : uops) {
    for (const UOpRef& s : u->src()) uses_[s.get()]++;
    if (u->op() == Op::kStore && u->src(0)->op() == Op::kDefineGlobal)
      stored.insert(u->src(0)->arg().Int());
  }
  MarkIndexValues(uops);
  Signature sig;
  sig.name = name;
  std::string prologue, body;
  int vars = 0;
  indent_ = 1;
  for (const UOpRef& u : uops) {
    const UOp& x = *u;
    switch (x.op()) {
      case Op::kDefineGlobal:
        if (x.dtype().scalar == ScalarType::kFloat64) double_ = true;
        AddBuffer(&sig, &prologue, x.arg().Int(), StorageC(x.dtype().scalar),
                  stored.count(x.arg().Int()) == 0);
        expr_[&x] = absl::StrCat("data", x.arg().Int());
        break;
      case Op::kDefineVar:
        AddVar(&sig, &prologue, x.arg().Str(), DeclType(x, Type(x.dtype())), vars++);
        expr_[&x] = x.arg().Str();
        break;
      case Op::kSpecial: {
        const std::string& n = x.arg().Str();
        KILN_CHECK(n.size() == 5 && (n.rfind("gidx", 0) == 0 || n.rfind("lidx", 0) == 0) &&
                       n[4] >= '0' && n[4] <= '2',
                   DialectName(), ": bad SPECIAL ", n);
        int64_t size = x.src(0)->vmax();
        if (n[0] == 'l') sig.local[n[4] - '0'] = size;
        Line(&prologue, absl::StrCat("const int ", n, " = ", Special(n), ";  /* ", size, " */"));
        expr_[&x] = n;
        break;
      }
      case Op::kDefineLocal: {
        std::string n = absl::StrCat("temp", x.arg().Ints()[0]);
        Line(&body, LocalArray(Type(x.dtype().Scalar()), n, x.arg().Ints()[1]));
        expr_[&x] = n;
        break;
      }
      case Op::kBarrier:
        Line(&body, Barrier());
        break;
      case Op::kConst:
        expr_[&x] = Literal(x);
        break;
      case Op::kRange: {
        std::string n = absl::StrCat("ridx", x.arg().Ints()[0]);
        auto [lo, hi] = RangeBounds(x);
        Line(&body, absl::StrCat("for (", DeclType(x, "int"), " ", n, " = ", lo, "; ", n, " < ", hi,
                                 "; ", n, "++) {"));
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
      case Op::kStore:
        Line(&body, Store(x));
        break;
      default: {
        std::string e = Value(x);
        // A scalar max is rendered `(a)>(b)?(a):(b)`, naming each operand
        // twice: inlined into the next max of a chain (a horizontal max of
        // 16 lanes), the text doubled at every step (a 1.1 MB line that took
        // clang 30+ s). Its result is always a named value.
        bool inline_ok = x.op() != Op::kLoad && x.dtype().count == 1 && uses_[&x] <= 1 &&
                         x.op() != Op::kBitcast && x.op() != Op::kMax;
        if (inline_ok) {
          expr_[&x] = e;
        } else {
          std::string n = absl::StrCat(x.op() == Op::kLoad ? "val" : "alu", tmp_++);
          Line(&body, absl::StrCat(DeclType(x, Type(x.dtype())), " ", n, " = ", e, ";"));
          expr_[&x] = n;
        }
      }
    }
  }
  std::string helpers;
  if (half_) absl::StrAppend(&helpers, HalfHelpers());
  if (bf16_) absl::StrAppend(&helpers, Bf16Helpers());
  sig.uses_double = double_;
  return Wrap(sig, helpers, prologue, body);
}

// An int32 scalar computed only from loop counters, variables and
// constants by integer arithmetic is an index: where the dialect asks for
// it (the CPU's C: 64-bit), it is declared with IndexType. Such a value
// stays within int32 wherever it addresses a buffer, so the wider type
// changes no result; clang then folds it into addressing instead of
// sign-extending an int (kernels are compiled with -fwrapv) at every load.
// Values mixed with loaded data, and uint32 arithmetic (the hashes of
// Rand), keep their type and its wrapping.
void CStyleRenderer::MarkIndexValues(const UOpList& uops) {
  index_.clear();
  if (IndexType().empty()) return;
  for (const UOpRef& u : uops) {
    const UOp& x = *u;
    if (x.dtype().count != 1 || x.dtype().scalar != ScalarType::kInt32) continue;
    switch (x.op()) {
      case Op::kRange:
      case Op::kDefineVar:
        index_.insert(&x);
        break;
      case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kIDiv: case Op::kMod:
      case Op::kMax: case Op::kNeg: case Op::kMulAcc: case Op::kWhere: case Op::kShl:
      case Op::kShr: case Op::kAnd: {
        bool any = false, all = true;
        for (size_t i = x.op() == Op::kWhere ? 1 : 0; i < x.src().size(); ++i) {
          const UOp* s = x.src(i).get();
          if (index_.count(s)) any = true;
          else if (!s->IsConst()) all = false;
        }
        if (any && all) index_.insert(&x);
        break;
      }
      default:
        break;
    }
  }
}

std::string CStyleRenderer::DeclType(const UOp& x, const std::string& type) const {
  return index_.count(&x) ? IndexType() : type;
}

void CStyleRenderer::AddBuffer(Signature* sig, std::string* /*prologue*/, int64_t index,
                               const std::string& storage, bool read_only) {
  // Parameters cover every index below the largest (unused ones too).
  while (static_cast<int64_t>(sig->params.size()) < index)
    sig->params.push_back(BufferParam(ScalarC(ScalarType::kUInt8),
                                      absl::StrCat("unused", sig->params.size()), true));
  sig->params.push_back(BufferParam(storage, absl::StrCat("data", index), read_only));
}

void CStyleRenderer::AddVar(Signature* sig, std::string* prologue, const std::string& name,
                            const std::string& type, int /*index*/) {
  std::string p = absl::StrCat("var_", name);
  sig->params.push_back(VarParam(p));
  Line(prologue, absl::StrCat("const ", type, " ", name, " = (", type, ")", p, ";"));
}

std::pair<std::string, std::string> CStyleRenderer::RangeBounds(const UOp& range) {
  return {E(range.src(0)), E(range.src(1))};
}

void CStyleRenderer::Line(std::string* out, const std::string& s) {
  absl::StrAppend(out, std::string(2 * indent_, ' '), s, "\n");
}

const std::string& CStyleRenderer::E(const UOpRef& u) {
  auto it = expr_.find(u.get());
  KILN_CHECK(it != expr_.end(), DialectName(), ": undefined ", u->Describe());
  return it->second;
}

std::string CStyleRenderer::Type(DType t) {
  KILN_CHECK(t.count == 1, DialectName(), ": vector values are not supported (", t.Name(), ")");
  if (t.scalar == ScalarType::kFloat64) double_ = true;
  return ScalarC(t.scalar);
}

std::string CStyleRenderer::Literal(const UOp& c) {
  DType t = c.dtype();
  ConstValue v = c.const_value();
  if (const auto* i = std::get_if<int64_t>(&v)) {
    if (t.scalar == ScalarType::kUInt64) return IntLiteral(t.scalar, *i);
    std::string s = IntLiteral(t.scalar, *i);
    return *i < 0 ? absl::StrCat("(", s, ")") : s;  // never "--"
  }
  double d = std::get<double>(v);
  bool dbl = t.scalar == ScalarType::kFloat64;
  if (dbl) double_ = true;
  if (std::isnan(d)) return NonFinite(dbl, true);
  if (std::isinf(d)) return absl::StrCat(d < 0 ? "(-" : "(", NonFinite(dbl, false), ")");
  char buf[64];
  std::snprintf(buf, sizeof(buf), dbl ? "%.17g" : "%.9g", d);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  if (!dbl) s += "f";
  return std::signbit(d) ? absl::StrCat("(", s, ")") : s;
}

// Rounds a float-carried half / bfloat16 result; wraps an integer result
// narrower than int (C computes those in int) back to its type.
std::string CStyleRenderer::Round(DType t, const std::string& e) {
  if (t.scalar == ScalarType::kFloat16) {
    half_ = true;
    return absl::StrCat("kiln_rh(", e, ")");
  }
  if (t.scalar == ScalarType::kBFloat16) {
    bf16_ = true;
    return absl::StrCat("kiln_rbf(", e, ")");
  }
  if ((t.IsInt() || t.IsBool()) && t.ScalarSize() < 4)
    return absl::StrCat("((", ScalarC(t.scalar), ")", e, ")");
  return e;
}

std::string CStyleRenderer::Load(const UOp& x) {
  DType t = x.dtype();
  Type(t);  // scalar check
  std::string raw = absl::StrCat(E(x.src(0)), "[", E(x.src(1)), "]");
  std::string e = raw;
  if (x.src(0)->op() == Op::kDefineLocal) {
    // Local memory holds computed values.
  } else if (t.scalar == ScalarType::kFloat16) {
    half_ = true;
    e = absl::StrCat("kiln_h2f(", raw, ")");
  } else if (t.scalar == ScalarType::kBFloat16) {
    bf16_ = true;
    e = absl::StrCat("kiln_bf2f(", raw, ")");
  } else if (t.IsBool()) {
    e = absl::StrCat("(", raw, "!=0)");
  }
  if (x.src().size() > 2) e = absl::StrCat("(", E(x.src(2)), "?", e, ":", E(x.src(3)), ")");
  return e;
}

std::string CStyleRenderer::Store(const UOp& x) {
  DType t = x.src(2)->dtype();
  Type(t);  // scalar check
  std::string val = E(x.src(2));
  if (x.src(0)->op() == Op::kDefineLocal) {
    // Local memory holds computed values.
  } else if (t.scalar == ScalarType::kFloat16) {
    half_ = true;
    val = absl::StrCat("kiln_f2h(", val, ")");
  } else if (t.scalar == ScalarType::kBFloat16) {
    bf16_ = true;
    val = absl::StrCat("kiln_f2bf(", val, ")");
  }
  std::string s = absl::StrCat(E(x.src(0)), "[", E(x.src(1)), "] = ", val, ";");
  if (x.src().size() > 3) s = absl::StrCat("if (", E(x.src(3)), ") ", s);
  return s;
}

std::string CStyleRenderer::Value(const UOp& x) {
  DType t = x.dtype();
  std::string ty = Type(t);
  auto src = [&](size_t i) { return E(x.src(i)); };
  bool is_double = t.scalar == ScalarType::kFloat64;
  auto bin = [&](const char* op) { return absl::StrCat("(", src(0), op, src(1), ")"); };
  switch (x.op()) {
    case Op::kLoad:
      return Load(x);
    case Op::kCast:
      if (t.IsBool()) return absl::StrCat("(", src(0), "!=0)");
      return Round(t, Convert(x.src(0)->dtype(), t, ty, src(0)));
    case Op::kBitcast: {
      DType from = x.src(0)->dtype();
      const std::string bits16 = StorageC(ScalarType::kFloat16);
      std::string ft = IsHalfLike(from) ? bits16 : Type(from);
      std::string tt = IsHalfLike(t) ? bits16 : ty;
      std::string sv = src(0);
      if (from.scalar == ScalarType::kFloat16)
        half_ = true, sv = absl::StrCat("kiln_f2h(", sv, ")");
      if (from.scalar == ScalarType::kBFloat16)
        bf16_ = true, sv = absl::StrCat("kiln_f2bf(", sv, ")");
      std::string e = Bitcast(ft, tt, sv);
      if (t.scalar == ScalarType::kFloat16) half_ = true, e = absl::StrCat("kiln_h2f(", e, ")");
      if (t.scalar == ScalarType::kBFloat16) bf16_ = true, e = absl::StrCat("kiln_bf2f(", e, ")");
      return e;
    }
    case Op::kNeg:
      return Round(t, absl::StrCat("(-(", src(0), "))"));
    case Op::kRecip:
      return Round(t, absl::StrCat("(", is_double ? "1.0" : "1.0f", "/", src(0), ")"));
    case Op::kExp2:
    case Op::kLog2:
    case Op::kSin:
    case Op::kSqrt:
    case Op::kTrunc: {
      const char* fn = x.op() == Op::kExp2   ? "exp2"
                       : x.op() == Op::kLog2 ? "log2"
                       : x.op() == Op::kSin  ? "sin"
                       : x.op() == Op::kSqrt ? "sqrt"
                                             : "trunc";
      return Round(t, absl::StrCat(MathFn(fn, is_double), "(", src(0), ")"));
    }
    case Op::kPow:
      return Round(t, absl::StrCat(MathFn("pow", is_double), "(", src(0), ",", src(1), ")"));
    case Op::kAdd:
      return Round(t, bin("+"));
    case Op::kSub:
      return Round(t, bin("-"));
    case Op::kMul:
      return Round(t, bin("*"));
    case Op::kFDiv:
      return Round(t, bin("/"));
    case Op::kIDiv:
    case Op::kMod: {
      const char* op = x.op() == Op::kIDiv ? "/" : "%";
      const UOp& d = *x.src(1);
      bool safe = d.IsConst() && !d.IsConstInt(0) && !d.IsConstInt(-1);
      if (safe) return Round(t, bin(op));
      if (t.IsUnsigned())
        return Round(t, absl::StrCat("(", src(1), "==0?0:", src(0), op, src(1), ")"));
      std::string neg = x.op() == Op::kIDiv ? absl::StrCat("-(", src(0), ")") : "0";
      return Round(t, absl::StrCat("(", src(1), "==0?0:(", src(1), "==-1?", neg, ":", src(0), op,
                                   src(1), "))"));
    }
    case Op::kMax:
      return absl::StrCat("((", src(0), ")>(", src(1), ")?(", src(0), "):(", src(1), "))");
    case Op::kCmpLt:
      return bin("<");
    case Op::kCmpNe:
      return bin("!=");
    case Op::kCmpEq:
      return bin("==");
    case Op::kAnd:
      return Round(t, bin("&"));
    case Op::kOr:
      return Round(t, bin("|"));
    case Op::kXor:
      return Round(t, bin("^"));
    case Op::kShl:
    case Op::kShr: {
      int bits = t.ScalarSize() * 8;
      return Round(t, absl::StrCat("(", src(0), x.op() == Op::kShl ? "<<" : ">>", "((", src(1),
                                   ")&", bits - 1, "))"));
    }
    case Op::kWhere:
      return absl::StrCat("(", src(0), "?", src(1), ":", src(2), ")");
    case Op::kMulAcc:
      if (!t.IsFloat()) return Round(t, absl::StrCat("((", src(0), "*", src(1), ")+", src(2), ")"));
      return Round(
          t, absl::StrCat(MathFn("fma", is_double), "(", src(0), ",", src(1), ",", src(2), ")"));
    default:
      KILN_CHECK(false, DialectName(), ": cannot render ", x.Describe());
  }
  return "";
}

std::string CStyleRenderer::IntLiteral(ScalarType s, int64_t v) const {
  switch (s) {
    case ScalarType::kInt64:
      return v == std::numeric_limits<int64_t>::min() ? "-9223372036854775807" + Int64Suffix(false) + "-1"
                                                      : absl::StrCat(v, Int64Suffix(false));
    case ScalarType::kUInt64:
      return absl::StrCat(static_cast<uint64_t>(v), Int64Suffix(true));
    case ScalarType::kUInt32:
      return absl::StrCat(v, "u");
    case ScalarType::kInt32:
      return v == -2147483648LL ? "-2147483647-1" : absl::StrCat(v);
    default:
      return absl::StrCat(v);
  }
}

}  // namespace kiln
