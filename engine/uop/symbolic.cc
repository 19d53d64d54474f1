#include "engine/uop/symbolic.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"

namespace kiln {
namespace {

bool IsIntScalar(const UOpRef& u) { return u->dtype().IsInt() && u->dtype().count == 1; }
bool NonNeg(const UOpRef& u) { return u->vmin() >= 0; }
UOpRef C(int64_t v, const UOpRef& like) { return UOp::ConstInt(v, like->dtype()); }
int64_t CInt(const UOpRef& u) { return std::get<int64_t>(u->const_value()); }

// ---------------- sums ----------------

struct Term {
  UOpRef factor;
  int64_t coef;
};

struct Sum {
  std::vector<Term> terms;
  int64_t constant = 0;
};

void Flatten(const UOpRef& u, int64_t mult, Sum* s) {
  switch (u->op()) {
    case Op::kAdd:
      Flatten(u->src(0), mult, s);
      Flatten(u->src(1), mult, s);
      return;
    case Op::kSub:
      Flatten(u->src(0), mult, s);
      Flatten(u->src(1), -mult, s);
      return;
    case Op::kNeg:
      Flatten(u->src(0), -mult, s);
      return;
    case Op::kMul:
      if (u->src(1)->IsConst()) return Flatten(u->src(0), mult * CInt(u->src(1)), s);
      if (u->src(0)->IsConst()) return Flatten(u->src(1), mult * CInt(u->src(0)), s);
      break;
    case Op::kConst:
      s->constant += mult * CInt(u);
      return;
    default:
      break;
  }
  s->terms.push_back({u, mult});
}

// Combines like terms and drops zero coefficients.
void CombineLike(Sum* s) {
  std::vector<Term> out;
  for (const Term& t : s->terms) {
    bool merged = false;
    for (Term& o : out) {
      if (o.factor == t.factor) {
        o.coef += t.coef;
        merged = true;
        break;
      }
    }
    if (!merged) out.push_back(t);
  }
  out.erase(std::remove_if(out.begin(), out.end(), [](const Term& t) { return t.coef == 0; }),
            out.end());
  s->terms = std::move(out);
}

bool IsDivC(const UOpRef& u) { return u->op() == Op::kIDiv && u->src(1)->IsConst(); }
bool IsModC(const UOpRef& u) { return u->op() == Op::kMod && u->src(1)->IsConst(); }

// Folds the patterns a reshape's unflattening leaves behind. Returns true if
// two terms were combined into one.
bool CombinePair(Term* t1, Term* t2, Term* out) {
  // R1: ((x//a)%b)*(a*k) + (x%a)*k -> (x%(a*b))*k   (x >= 0)
  if (IsModC(t1->factor) && IsDivC(t1->factor->src(0)) && IsModC(t2->factor)) {
    const UOpRef& x = t1->factor->src(0)->src(0);
    int64_t a = CInt(t1->factor->src(0)->src(1)), b = CInt(t1->factor->src(1));
    if (t2->factor->src(0) == x && CInt(t2->factor->src(1)) == a && NonNeg(x) &&
        t1->coef == a * t2->coef) {
      *out = {Simplify(x % (a * b)), t2->coef};
      return true;
    }
  }
  // R1 with a plain x//a... : (x//a)*(a*k) + (x%a)*k -> x*k   (x >= 0)
  if (IsDivC(t1->factor) && IsModC(t2->factor)) {
    const UOpRef& x = t1->factor->src(0);
    int64_t a = CInt(t1->factor->src(1));
    if (t2->factor->src(0) == x && CInt(t2->factor->src(1)) == a && NonNeg(x) &&
        t1->coef == a * t2->coef) {
      *out = {x, t2->coef};
      return true;
    }
  }
  // R2: (x//(a*b))*(b*k) + ((x//a)%b)*k -> (x//a)*k   (x >= 0)
  if (IsDivC(t1->factor) && IsModC(t2->factor) && IsDivC(t2->factor->src(0))) {
    const UOpRef& x = t1->factor->src(0);
    const UOpRef& inner = t2->factor->src(0);
    int64_t ab = CInt(t1->factor->src(1)), a = CInt(inner->src(1)), b = CInt(t2->factor->src(1));
    if (inner->src(0) == x && a * b == ab && NonNeg(x) && t1->coef == b * t2->coef) {
      *out = {inner, t2->coef};
      return true;
    }
  }
  return false;
}

void CombinePatterns(Sum* s) {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < s->terms.size() && !changed; ++i) {
      for (size_t j = 0; j < s->terms.size() && !changed; ++j) {
        if (i == j) continue;
        Term out;
        if (CombinePair(&s->terms[i], &s->terms[j], &out)) {
          size_t hi = std::max(i, j), lo = std::min(i, j);
          s->terms.erase(s->terms.begin() + hi);
          s->terms[lo] = out;
          CombineLike(s);
          changed = true;
        }
      }
    }
  }
}

UOpRef Build(const Sum& s, DType dt) {
  std::vector<Term> terms = s.terms;
  std::vector<std::string> keys;
  std::stable_sort(terms.begin(), terms.end(), [](const Term& a, const Term& b) {
    if (a.coef != b.coef) return a.coef > b.coef;
    return RenderExpr(a.factor) < RenderExpr(b.factor);
  });
  UOpRef r;
  for (const Term& t : terms) {
    UOpRef v = t.coef == 1 ? t.factor : t.factor * UOp::ConstInt(t.coef, dt);
    r = r ? r + v : v;
  }
  if (!r) return UOp::ConstInt(s.constant, dt);
  if (s.constant != 0) r = r + UOp::ConstInt(s.constant, dt);
  return r;
}

UOpRef CanonicalSum(const UOpRef& u) {
  if (!IsIntScalar(u)) return nullptr;
  Sum s;
  Flatten(u, 1, &s);
  CombineLike(&s);
  CombinePatterns(&s);
  UOpRef r = Build(s, u->dtype());
  return r == u ? nullptr : r;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// (sum) % c and (sum) // c for non-negative sums (so C's truncation is
// floor). Write the sum as g*A + S, S the terms whose coefficient g does not
// divide plus the constant:
//  - S in one bucket [j*g, (j+1)*g): x // c = (A + j) // (c/g) and
//    x % c = ((A + j) % (c/g))*g + (S - j*g). With g = c this folds a padded
//    view's index (i*160 + m - 161, m in [1,160]) to i; with g < c it turns
//    (a*160 + b)//320, b in [0,160), into a//2.
//  - otherwise, with S >= 0: x // c = A + S // c and x % c = S' % c (S' with
//    every coefficient reduced modulo c).
UOpRef DivModSum(const UOpRef& u) {
  const UOpRef& x = u->src(0);
  int64_t c = CInt(u->src(1));
  if (c <= 0 || !IsIntScalar(u) || !NonNeg(x)) return nullptr;
  Sum s;
  Flatten(x, 1, &s);
  CombineLike(&s);
  DType dt = u->dtype();
  bool div = u->op() == Op::kIDiv;
  // Candidate factors g: c itself, then the common factors of c with each
  // coefficient, largest first.
  std::vector<int64_t> gs = {c};
  for (const Term& t : s.terms) {
    int64_t g = std::gcd(c, std::abs(t.coef));
    if (g > 1 && std::find(gs.begin(), gs.end(), g) == gs.end()) gs.push_back(g);
  }
  std::sort(gs.begin() + 1, gs.end(), std::greater<int64_t>());
  for (int64_t g : gs) {
    Sum a, rest;
    for (const Term& t : s.terms) {
      if (t.coef % g == 0) a.terms.push_back({t.factor, t.coef / g});
      else rest.terms.push_back(t);
    }
    if (g != c && a.terms.empty()) continue;
    a.constant = FloorDiv(s.constant, g);
    rest.constant = s.constant - a.constant * g;
    UOpRef r = Build(rest, dt);
    int64_t j = FloorDiv(r->vmin(), g);
    if (FloorDiv(r->vmax(), g) != j) continue;
    a.constant += j;
    rest.constant -= j * g;
    UOpRef av = Build(a, dt);
    if (g == c) return div ? av : Build(rest, dt);
    return div ? av / (c / g) : (av % (c / g)) * g + Build(rest, dt);
  }
  Sum q, r;
  for (const Term& t : s.terms) {
    int64_t m = ((t.coef % c) + c) % c;
    if (m != t.coef) q.terms.push_back({t.factor, (t.coef - m) / c});
    if (m) r.terms.push_back({t.factor, m});
  }
  q.constant = FloorDiv(s.constant, c);
  r.constant = s.constant - q.constant * c;
  UOpRef rest = Build(r, dt);
  if (rest->vmin() < 0) return nullptr;
  if (!div) {
    if (rest->vmax() < c) return rest;
    UOpRef m = rest % c;
    return m == u ? nullptr : m;
  }
  if (q.terms.empty() && q.constant == 0) return nullptr;
  return Build(q, dt) + rest / c;
}

bool Nonzero(int64_t v) { return v != 0; }

// The node a VECTORIZE repeats in every lane (a broadcast), or null.
const UOpRef* BroadcastOf(const UOpRef& u) {
  if (u->op() != Op::kVectorize || u->src().empty()) return nullptr;
  for (const UOpRef& s : u->src())
    if (s != u->src(0)) return nullptr;
  return &u->src(0);
}

// A constant equal to v (an integer, or a float with that value).
bool IsValue(const UOp& c, int64_t v) {
  ConstValue cv = c.const_value();
  if (const auto* i = std::get_if<int64_t>(&cv)) return *i == v;
  return std::get<double>(cv) == static_cast<double>(v);
}

std::vector<Rule> MakeRules() {
  using P = UPat;
  std::vector<Rule> r;
  auto add = [&](UPat p, RewriteFn f, const char* name) { r.push_back({std::move(p), f, name}); };

  // The elementwise ops: ALU ops and casts.
  const UPat elementwise =
      P::Ops({Op::kNeg, Op::kExp2, Op::kLog2, Op::kSin, Op::kSqrt, Op::kRecip, Op::kTrunc, Op::kAdd,
              Op::kSub, Op::kMul, Op::kFDiv, Op::kIDiv, Op::kMod, Op::kMax, Op::kCmpLt, Op::kCmpNe,
              Op::kCmpEq, Op::kAnd, Op::kOr, Op::kXor, Op::kShl, Op::kShr, Op::kPow, Op::kWhere,
              Op::kMulAcc, Op::kCast});
  // Constant folding of elementwise ops.
  add(elementwise,
      [](const Match& m) -> UOpRef {
        const UOpRef& u = m.root();
        if (u->dtype().count != 1) return nullptr;
        if (!EvalAluDefined(u->op(), u->dtype(), u->src(0)->dtype())) return nullptr;
        std::vector<ConstValue> v;
        for (const UOpRef& s : u->src()) {
          if (!s->IsConst()) return nullptr;
          v.push_back(s->const_value());
        }
        return UOp::Const(u->dtype(), EvalAlu(u->op(), u->dtype(), v, u->src(0)->dtype()));
      },
      "const_fold");
  // Vector ALU ops over broadcasts (a VECTORIZE of one node in every lane,
  // e.g. a constant lowered at a vector width): the op on the scalar, then
  // broadcast, so the scalar rules above fold it. A masked-out segment's
  // loads are such constants; without this the sums and selects over them
  // reached the C source (Winograd transforms' segments).
  add(elementwise,
      [](const Match& m) -> UOpRef {
        const UOpRef& u = m.root();
        if (u->dtype().count == 1) return nullptr;
        UOpList scalars;
        for (const UOpRef& s : u->src()) {
          const UOpRef* b = BroadcastOf(s);
          if (b == nullptr) return nullptr;
          scalars.push_back(*b);
        }
        UOpRef scalar = SimplifyNode(UOp::Make(u->op(), u->dtype().Scalar(), scalars, u->arg()));
        return UOp::Make(Op::kVectorize, u->dtype(), UOpList(u->dtype().count, scalar));
      },
      "broadcast_alu");
  // A select on a constant broadcast condition, and the identities of the
  // scalar rules below with a broadcast constant.
  add(P::Alu(Op::kWhere, {P::Var("c"), P::Var("a"), P::Var("b")}),
      [](const Match& m) -> UOpRef {
        const UOpRef* c = BroadcastOf(m["c"]);
        if (c == nullptr || !(*c)->IsConst()) return nullptr;
        return (*c)->IsConstInt(0) ? m["b"] : m["a"];
      },
      "where_broadcast_const");
  add(P::Ops({Op::kAdd, Op::kSub, Op::kMul, Op::kFDiv}),
      [](const Match& m) -> UOpRef {
        const UOpRef& u = m.root();
        if (u->dtype().count == 1) return nullptr;
        auto is = [](const UOpRef& x, int64_t v) {
          const UOpRef* b = BroadcastOf(x);
          return b != nullptr && (*b)->IsConst() && IsValue(**b, v);
        };
        const int64_t unit = u->op() == Op::kAdd || u->op() == Op::kSub ? 0 : 1;
        if (is(u->src(1), unit)) return u->src(0);
        if ((u->op() == Op::kAdd || u->op() == Op::kMul) && is(u->src(0), unit)) return u->src(1);
        return nullptr;
      },
      "broadcast_identity");
  // Integer ALU nodes with a single possible value.
  add(P::Ops({Op::kAdd, Op::kSub, Op::kMul, Op::kIDiv, Op::kMod, Op::kMax, Op::kCmpLt, Op::kCmpNe,
              Op::kCmpEq, Op::kAnd, Op::kOr, Op::kWhere, Op::kNeg})
          .IntOnly(),
      [](const Match& m) -> UOpRef {
        const UOpRef& u = m.root();
        if (u->dtype().count != 1 || u->vmin() != u->vmax()) return nullptr;
        return UOp::Const(u->dtype(), u->vmin());
      },
      "bounds_fold");
  // Identities.
  add(P::Alu(Op::kAdd, {P::Var("x"), P::ConstVal(0)}).Commutative(),
      [](const Match& m) { return m["x"]; }, "x+0");
  add(P::Alu(Op::kSub, {P::Var("x"), P::ConstVal(0)}), [](const Match& m) { return m["x"]; },
      "x-0");
  add(P::Alu(Op::kMul, {P::Var("x"), P::ConstVal(1)}).Commutative(),
      [](const Match& m) { return m["x"]; }, "x*1");
  add(P::Alu(Op::kMul, {P::Var("x"), P::ConstVal(0)}).Commutative().IntOnly(),
      [](const Match& m) { return C(0, m.root()); }, "x*0");
  add(P::Alu(Op::kIDiv, {P::Var("x"), P::ConstVal(1)}), [](const Match& m) { return m["x"]; },
      "x//1");
  add(P::Alu(Op::kMod, {P::Var("x"), P::ConstVal(1)}).IntOnly(),
      [](const Match& m) { return C(0, m.root()); }, "x%1");
  add(P::Alu(Op::kFDiv, {P::Var("x"), P::ConstVal(1)}), [](const Match& m) { return m["x"]; },
      "x/1");
  add(P::Alu(Op::kWhere, {P::Var("c"), P::Var("x"), P::Var("x")}),
      [](const Match& m) { return m["x"]; }, "where_same");
  add(P::Alu(Op::kWhere, {P::Cvar("c"), P::Var("a"), P::Var("b")}),
      [](const Match& m) -> UOpRef {
        if (m["c"]->dtype().count != 1) return nullptr;
        return m["c"]->IsConstInt(0) ? m["b"] : m["a"];
      },
      "where_const");
  add(P::Alu(Op::kAnd, {P::Var("x"), P::Cvar("c")}).Commutative(),
      [](const Match& m) -> UOpRef {
        if (!m["x"]->dtype().IsBool()) return nullptr;
        return m["c"]->IsConstInt(0) ? m["c"] : m["x"];
      },
      "bool_and_const");
  add(P::Alu(Op::kOr, {P::Var("x"), P::Cvar("c")}).Commutative(),
      [](const Match& m) -> UOpRef {
        if (!m["x"]->dtype().IsBool()) return nullptr;
        return m["c"]->IsConstInt(0) ? m["x"] : m["c"];
      },
      "bool_or_const");
  add(P::Alu(Op::kAnd, {P::Var("x"), P::Var("x")}), [](const Match& m) { return m["x"]; },
      "x&x");
  // Bounds: x % c -> x, x // c -> 0 for 0 <= x < c; max of ordered values.
  add(P::Alu(Op::kMod, {P::Var("x"), P::Cvar("c")}).IntOnly(),
      [](const Match& m) -> UOpRef {
        int64_t c = CInt(m["c"]);
        const UOpRef& x = m["x"];
        if (c > 0 && x->vmin() >= 0 && x->vmax() < c) return x;
        return nullptr;
      },
      "mod_bound");
  add(P::Alu(Op::kIDiv, {P::Var("x"), P::Cvar("c")}).IntOnly(),
      [](const Match& m) -> UOpRef {
        int64_t c = CInt(m["c"]);
        const UOpRef& x = m["x"];
        if (c > 0 && x->vmin() >= 0 && x->vmax() < c) return C(0, x);
        return nullptr;
      },
      "div_bound");
  add(P::Alu(Op::kMax, {P::Var("a"), P::Var("b")}).IntOnly(),
      [](const Match& m) -> UOpRef {
        if (m["a"]->vmin() >= m["b"]->vmax()) return m["a"];
        if (m["b"]->vmin() >= m["a"]->vmax()) return m["b"];
        return nullptr;
      },
      "max_bound");
  // Nested division / modulo (non-negative x).
  add(P::Alu(Op::kIDiv, {P::Alu(Op::kIDiv, {P::Var("x"), P::Cvar("a")}), P::Cvar("b")}).IntOnly(),
      [](const Match& m) -> UOpRef {
        int64_t a = CInt(m["a"]), b = CInt(m["b"]);
        if (a <= 0 || b <= 0 || !NonNeg(m["x"])) return nullptr;
        return m["x"] / (a * b);
      },
      "div_div");
  add(P::Alu(Op::kMod, {P::Alu(Op::kMod, {P::Var("x"), P::Cvar("a")}), P::Cvar("b")}).IntOnly(),
      [](const Match& m) -> UOpRef {
        int64_t a = CInt(m["a"]), b = CInt(m["b"]);
        if (a <= 0 || b <= 0 || a % b != 0 || !NonNeg(m["x"])) return nullptr;
        return m["x"] % b;
      },
      "mod_mod");
  // (x % (a*b)) // a -> (x // a) % b
  add(P::Alu(Op::kIDiv, {P::Alu(Op::kMod, {P::Var("x"), P::Cvar("m")}), P::Cvar("a")}).IntOnly(),
      [](const Match& m) -> UOpRef {
        int64_t md = CInt(m["m"]), a = CInt(m["a"]);
        if (a <= 0 || md <= 0 || md % a != 0 || !NonNeg(m["x"])) return nullptr;
        return (m["x"] / a) % (md / a);
      },
      "mod_div");
  // Sums and products of integers.
  add(P::Ops({Op::kAdd, Op::kSub}).IntOnly(), [](const Match& m) { return CanonicalSum(m.root()); },
      "canonical_sum");
  add(P::Alu(Op::kMul, {P::Var("x"), P::Cvar("c")}).IntOnly(),
      [](const Match& m) -> UOpRef {
        const UOpRef& x = m["x"];
        if (x->op() == Op::kAdd || x->op() == Op::kSub || x->op() == Op::kMul)
          return CanonicalSum(m.root());
        return nullptr;
      },
      "distribute_mul");
  add(P::Alu(Op::kMul, {P::Cvar("c"), P::Var("x")}).IntOnly(),
      [](const Match& m) -> UOpRef {
        if (m["x"]->IsConst()) return nullptr;
        return m["x"] * m["c"];
      },
      "const_mul_right");
  add(P::Ops({Op::kIDiv, Op::kMod}).IntOnly(),
      [](const Match& m) -> UOpRef {
        const UOpRef& u = m.root();
        if (!u->src(1)->IsConst()) return nullptr;
        Op xo = u->src(0)->op();
        if (xo != Op::kAdd && xo != Op::kSub && xo != Op::kMul) return nullptr;
        return DivModSum(u);
      },
      "divmod_sum");
  // Comparisons: (x + k) < c -> x < c-k;  (x*g) < c -> x < ceil(c/g) for g > 0.
  add(P::Alu(Op::kCmpLt, {P::Var("x"), P::Cvar("c")}).Named("cmp"),
      [](const Match& m) -> UOpRef {
        const UOpRef& x = m["x"];
        if (!IsIntScalar(x)) return nullptr;
        int64_t c = CInt(m["c"]);
        Sum s;
        Flatten(x, 1, &s);
        CombineLike(&s);
        if (s.terms.empty()) return nullptr;
        int64_t g = 0;
        for (const Term& t : s.terms) g = std::gcd(g, std::abs(t.coef));
        int64_t rhs = c - s.constant;
        if (s.constant == 0 && g <= 1) return nullptr;
        Sum d;
        for (const Term& t : s.terms) d.terms.push_back({t.factor, t.coef / g});
        // sum*g < rhs  <=>  sum < ceil(rhs / g)
        int64_t q = rhs >= 0 ? (rhs + g - 1) / g : -((-rhs) / g);
        UOpRef lhs = Build(d, x->dtype());
        UOpRef out = lhs < UOp::ConstInt(q, x->dtype());
        return out == m.root() ? nullptr : out;
      },
      "cmp_sum");
  (void)Nonzero;
  return r;
}

// ---------------- rendering ----------------

std::string Render(const UOpRef& u, bool c_style) {
  auto bin = [&](const char* op) {
    return absl::StrCat("(", Render(u->src(0), c_style), op, Render(u->src(1), c_style), ")");
  };
  switch (u->op()) {
    case Op::kConst: {
      ConstValue v = u->const_value();
      if (const auto* i = std::get_if<int64_t>(&v)) {
        if (u->dtype().IsBool()) return *i ? "1" : "0";
        return std::to_string(*i);
      }
      return absl::StrCat(std::get<double>(v));
    }
    case Op::kDefineVar: return u->arg().Str();
    case Op::kSpecial: return u->arg().Str();
    case Op::kRange: return absl::StrCat("ridx", u->arg().Ints()[0]);
    case Op::kAdd: return bin("+");
    case Op::kSub: return bin("-");
    case Op::kMul: return bin("*");
    case Op::kIDiv: return bin(c_style ? "/" : "//");
    case Op::kMod: return bin("%");
    case Op::kCmpLt: return bin("<");
    case Op::kCmpNe: return bin("!=");
    case Op::kCmpEq: return bin("==");
    case Op::kAnd: return bin(c_style || !u->dtype().IsBool() ? "&" : " and ");
    case Op::kOr: return bin(c_style || !u->dtype().IsBool() ? "|" : " or ");
    case Op::kNeg: return absl::StrCat("(-", Render(u->src(0), c_style), ")");
    case Op::kMax:
      return absl::StrCat(c_style ? "max(" : "max(", Render(u->src(0), c_style), ", ",
                          Render(u->src(1), c_style), ")");
    case Op::kWhere:
      return absl::StrCat("(", Render(u->src(0), c_style), "?", Render(u->src(1), c_style), ":",
                          Render(u->src(2), c_style), ")");
    default: return absl::StrCat("<", OpName(u->op()), ">");
  }
}

std::string StripParens(std::string s) {
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return s;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
    if (depth == 0 && i + 1 < s.size()) return s;  // first paren closes early
  }
  return s.substr(1, s.size() - 2);
}

}  // namespace

const PatternMatcher& SymbolicRules() {
  static const PatternMatcher* pm = new PatternMatcher(MakeRules(), /*fixpoint_bit=*/0);
  return *pm;
}

UOpRef Simplify(const UOpRef& u) { return GraphRewrite(u, SymbolicRules()); }

UOpRef SimplifyNode(const UOpRef& u) {
  UOpRef cur = u;
  for (int i = 0; i < 16; ++i) {  // each rule shrinks or canonicalizes: a few steps
    UOpRef next = SymbolicRules().Rewrite(cur);
    if (next == nullptr || next == cur) break;
    cur = std::move(next);
  }
  return cur;
}

std::string RenderExpr(const UOpRef& u) { return StripParens(Render(u, false)); }
std::string RenderExprC(const UOpRef& u) { return StripParens(Render(u, true)); }

}  // namespace kiln
