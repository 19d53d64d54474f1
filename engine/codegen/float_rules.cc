#include "engine/codegen/float_rules.h"

#include <cmath>
#include <limits>
#include <utility>
#include <variant>
#include <vector>

#include "engine/uop/pattern.h"
#include "engine/uop/symbolic.h"

namespace kiln {
namespace {

bool Rewritable(const DType& t) {
  return t.count == 1 && (t.Scalar() == dtypes::kFloat32 || t.Scalar() == dtypes::kFloat64);
}

// A multiply of the node's own dtype (no cast between them).
bool IsMulOf(const UOpRef& m, const UOpRef& root) {
  return m->op() == Op::kMul && m->dtype() == root->dtype();
}

UOpRef MulAcc(const UOpRef& a, const UOpRef& b, const UOpRef& c) {
  return UOp::Make(Op::kMulAcc, c->dtype(), {a, b, c});
}

UOpRef Neg(const UOpRef& x) { return SimplifyNode(UOp::Make(Op::kNeg, x->dtype(), {x})); }

PatternMatcher MakeFloatRules() {
  using P = UPat;
  std::vector<Rule> r;
  auto add = [&](UPat p, RewriteFn f, const char* name) { r.push_back({std::move(p), f, name}); };
  // (A commutative pattern binds its first order only, so the callback
  // looks for the multiply on either side.)
  add(P::Alu(Op::kAdd, {P::Var("x"), P::Var("y")}),
      [](const Match& m) -> UOpRef {
        for (const auto& [p, c] : {std::pair{m["x"], m["y"]}, std::pair{m["y"], m["x"]}})
          if (IsMulOf(p, m.root())) return MulAcc(p->src(0), p->src(1), c);
        return nullptr;
      },
      "a*b+c");
  add(P::Alu(Op::kSub, {P::Var("m"), P::Var("c")}),
      [](const Match& m) -> UOpRef {
        if (!IsMulOf(m["m"], m.root())) return nullptr;
        return MulAcc(m["m"]->src(0), m["m"]->src(1), Neg(m["c"]));
      },
      "a*b-c");
  add(P::Alu(Op::kSub, {P::Var("c"), P::Var("m")}),
      [](const Match& m) -> UOpRef {
        if (!IsMulOf(m["m"], m.root())) return nullptr;
        return MulAcc(Neg(m["m"]->src(0)), m["m"]->src(1), m["c"]);
      },
      "c-a*b");
  add(P::Alu(Op::kFDiv, {P::Var("x"), P::Cvar("c")}),
      [](const Match& m) -> UOpRef {
        const DType t = m.root()->dtype();
        const ConstValue cv = m["c"]->const_value();
        const double* cp = std::get_if<double>(&cv);
        if (cp == nullptr || m["c"]->dtype() != t) return nullptr;
        const double c = *cp;
        const bool f32 = t.Scalar() == dtypes::kFloat32;
        // The reciprocal as the kernel will hold it (float32 rounds it).
        const double inv = f32 ? static_cast<double>(static_cast<float>(1.0 / c)) : 1.0 / c;
        const double min_normal = f32 ? std::numeric_limits<float>::min()
                                      : std::numeric_limits<double>::min();
        if (!std::isfinite(inv) || std::fabs(inv) < min_normal) return nullptr;
        return UOp::Make(Op::kMul, t, {m["x"], UOp::Const(t, inv)});
      },
      "x/C");
  return PatternMatcher(std::move(r));
}

}  // namespace

UOpRef RewriteFloatNode(const UOpRef& u) {
  if (!Rewritable(u->dtype())) return nullptr;
  static const PatternMatcher* const kRules = new PatternMatcher(MakeFloatRules());
  return kRules->Rewrite(u);
}

}  // namespace kiln
