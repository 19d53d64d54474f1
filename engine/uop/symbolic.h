// Symbolic algebra on kiln's IR: constant folding, algebraic identities and
// index arithmetic driven by value bounds (vmin/vmax).
//
//   Variable a in [0,10]:  a*10 spans 0..100
//   (a + b*10) % 10  -> a % 10
//   (a*40 + b) // 20 -> a*2          when 0 <= b < 20
//   3*5+2            -> 17
//   sums are flattened, like terms combined, and the unflattening patterns a
//   reshape produces fold back: (x//a%b)*a + x%a -> x%(a*b),
//   (x//(a*b))*b + (x//a)%b -> x//a.
// Integer division and modulo follow C (truncation); rules that rely on floor
// semantics only fire when the operands are provably non-negative.
#ifndef KILN_ENGINE_UOP_SYMBOLIC_H_
#define KILN_ENGINE_UOP_SYMBOLIC_H_

#include <string>
#include <vector>

#include "engine/uop/pattern.h"
#include "engine/uop/uop.h"

namespace kiln {

// The rules; Simplify applies them to a fixpoint.
const PatternMatcher& SymbolicRules();
UOpRef Simplify(const UOpRef& u);
// Applies the rules at `u` alone (its sources taken as already simplified), to
// a fixpoint: for builders that simplify each node as they make it, in time
// linear in the nodes instead of a walk of the whole graph per node.
UOpRef SimplifyNode(const UOpRef& u);

// Evaluates one ALU op (or CAST) on constants with kiln's semantics (the same
// as the interpreter device): results are rounded / wrapped to `dtype`.
// Only for ops EvalAluDefined accepts (others CHECK-fail).
ConstValue EvalAlu(Op op, DType dtype, const std::vector<ConstValue>& src,
                   DType src_dtype = dtypes::kVoid);
// Whether EvalAlu defines `op` on these types: bitwise ops, shifts, IDIV and
// MOD need integers (or bool), EXP2 .. TRUNC, FDIV and POW need floats. A
// model can build the others (BitwiseAnd on float inputs): they are left
// unfolded, for the device to refuse.
bool EvalAluDefined(Op op, DType dtype, DType src_dtype = dtypes::kVoid);
// Rounds / wraps a value to a dtype (float32 rounding, int wraparound...).
ConstValue Truncate(DType dtype, ConstValue v);

// Renders an integer expression: Python-like ("(a*10)+(b//2)") or C ("(a*10)+(b/2)").
// The outermost parentheses are dropped.
std::string RenderExpr(const UOpRef& u);
std::string RenderExprC(const UOpRef& u);

}  // namespace kiln

#endif  // KILN_ENGINE_UOP_SYMBOLIC_H_
