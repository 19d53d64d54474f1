#include "engine/uop/symbolic.h"

#include <cmath>
#include <random>
#include <unordered_map>

#include "gtest/gtest.h"

namespace kiln {
namespace {

int64_t CInt(const UOpRef& u) { return std::get<int64_t>(u->const_value()); }

class SymbolicTest : public ::testing::Test {
 protected:
  UOpRef a = UOp::Variable("a", 0, 10);
  UOpRef b = UOp::Variable("b", 0, 19);
  UOpRef c = UOp::Variable("c", 0, 9);
};

TEST_F(SymbolicTest, IssueExamples) {
  UOpRef e = a * 10;
  EXPECT_EQ(e->vmin(), 0);
  EXPECT_EQ(e->vmax(), 100);
  UOpRef b10 = UOp::Variable("b", 0, 10);
  EXPECT_EQ(RenderExpr(Simplify((a + b10 * 10) % 10)), "a%10");
  EXPECT_EQ(Simplify((a * 40 + b) / 20), Simplify(a * 2));
  EXPECT_EQ(RenderExpr(Simplify((a * 40 + b) / 20)), "a*2");
  UOpRef k = UOp::ConstInt(3) * UOp::ConstInt(5) + UOp::ConstInt(2);
  EXPECT_EQ(Simplify(k), UOp::ConstInt(17));
  EXPECT_EQ(RenderExprC(Simplify(a / 2 + c % 3)), "(a/2)+(c%3)");
}

TEST_F(SymbolicTest, Identities) {
  EXPECT_EQ(Simplify(a + 0), a);
  EXPECT_EQ(Simplify(a * 1), a);
  EXPECT_EQ(Simplify(a * 0), UOp::ConstInt(0));
  EXPECT_EQ(Simplify(a - a), UOp::ConstInt(0));
  EXPECT_EQ(Simplify(a + a), Simplify(a * 2));
  EXPECT_EQ(Simplify((a + 3) - 3), a);
  EXPECT_EQ(Simplify(c % 10), c);
  EXPECT_EQ(Simplify(c / 10), UOp::ConstInt(0));
  EXPECT_EQ(Simplify(a < 11), UOp::Const(dtypes::kBool, int64_t{1}));
  EXPECT_EQ(Simplify(a < 0), UOp::Const(dtypes::kBool, int64_t{0}));
  EXPECT_EQ(Simplify((a / 2) / 3), Simplify(a / 6));
  EXPECT_EQ(Simplify((a % 8) % 4), Simplify(a % 4));
  EXPECT_EQ(Simplify((a * 4 + c * 2) / 2), Simplify(a * 2 + c));
  EXPECT_EQ(Simplify((a * 6) % 3), UOp::ConstInt(0));
}

TEST_F(SymbolicTest, UnflattenFoldsBack) {
  UOpRef x = UOp::Variable("idx0", 0, 99);
  // (x//10)*10 + x%10 -> x
  EXPECT_EQ(Simplify((x / 10) * 10 + x % 10), x);
  // ((x//2)%5)*2 + x%2 -> x%10
  EXPECT_EQ(RenderExpr(Simplify(((x / 2) % 5) * 2 + x % 2)), "idx0%10");
  // (x//20)*2 + (x//10)%2 -> x//10
  EXPECT_EQ(RenderExpr(Simplify((x / 20) * 2 + (x / 10) % 2)), "idx0//10");
}

TEST_F(SymbolicTest, DivModOfShiftedSumInOneBucket) {
  // The address of a padded view inside its mask: rows / cols in [1,160].
  UOpRef i = UOp::Variable("i", 0, 95);
  UOpRef m = UOp::Variable("m", 1, 160);
  UOpRef n = UOp::Variable("n", 1, 160);
  UOpRef flat = i * 25600 + m * 160 + n - 161;
  EXPECT_EQ(Simplify(flat / 25600), i);
  EXPECT_EQ(RenderExpr(Simplify(flat % 25600)), "((m*160)+n)+-161");
  // Not one bucket (n - 1 spans 0..159 but n + 100 does not): left alone.
  UOpRef wide = i * 160 + n + 100;
  EXPECT_NE(Simplify(wide / 160), i);
  // A bucket above zero: (i*8 + 9 + (c%3)) // 8 -> i + 1.
  EXPECT_EQ(Simplify((i * 8 + 9 + c % 3) / 8), Simplify(i + 1));
  EXPECT_EQ(RenderExpr(Simplify((i * 8 + 9 + c % 3) % 8)), "(c%3)+1");
}

TEST_F(SymbolicTest, DivModByCommonFactor) {
  UOpRef i = UOp::Variable("i", 0, 95);
  UOpRef m = UOp::Variable("m", 1, 160);
  UOpRef n = UOp::Variable("n", 1, 160);
  UOpRef b = UOp::Variable("b", 0, 159);
  // (a*160 + b) // 320 with b in [0,160): a // 2.
  EXPECT_EQ(Simplify((i * 160 + b) / 320), Simplify(i / 2));
  // A nearest-upsampled (x2) row inside a padded view: no division by 320
  // is left, only the halving of the row.
  UOpRef flat = i * 25600 + m * 160 + n - 161;
  EXPECT_EQ(RenderExpr(Simplify((flat / 320) % 80)), "((m+1)//2)+-1");
  EXPECT_EQ(RenderExpr(Simplify((flat / 2) % 80)), "((n+1)//2)+-1");
}

// Every rewrite must keep C semantics on every value of the variables,
// negative ones included: random sums divided / reduced by random constants
// are compared with their simplified forms at every point.
TEST_F(SymbolicTest, RandomDivModKeepValues) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  UOpRef v[3] = {UOp::Variable("p", -3, 9), UOp::Variable("q", 0, 11), UOp::Variable("r", 1, 7)};
  for (int iter = 0; iter < 200; ++iter) {
    UOpRef e = UOp::ConstInt(pick(-20, 20));
    for (int k = 0; k < 3; ++k) {
      int coef = pick(-2, 3) * (1 << pick(0, 4));
      UOpRef t = v[k];
      if (pick(0, 3) == 0) t = t / pick(1, 6);
      if (pick(0, 3) == 0) t = t % pick(1, 6);
      e = e + t * coef;
    }
    int64_t c = pick(1, 5) * (1 << pick(0, 4));
    UOpRef u = pick(0, 1) ? e / c : e % c;
    if (pick(0, 2) == 0) u = u % pick(1, 40);
    UOpRef simple = Simplify(u);
    for (int64_t a = -3; a <= 9; ++a)
      for (int64_t b2 = 0; b2 <= 11; b2 += 3)
        for (int64_t c2 = 1; c2 <= 7; c2 += 2) {
          std::unordered_map<const UOp*, UOpRef> at = {{v[0].get(), UOp::ConstInt(a)},
                                                       {v[1].get(), UOp::ConstInt(b2)},
                                                       {v[2].get(), UOp::ConstInt(c2)}};
          UOpRef want = Simplify(Substitute(u, at)), got = Simplify(Substitute(simple, at));
          ASSERT_TRUE(want->IsConst() && got->IsConst());
          ASSERT_EQ(CInt(want), CInt(got)) << RenderExpr(u) << " -> " << RenderExpr(simple)
                                           << " at p=" << a << " q=" << b2 << " r=" << c2;
        }
  }
}

TEST_F(SymbolicTest, Comparisons) {
  UOpRef x = UOp::Variable("x", 0, 100);
  EXPECT_EQ(RenderExpr(Simplify(x * 4 < 10)), "x<3");
  EXPECT_EQ(RenderExpr(Simplify(x + 5 < 10)), "x<5");
  EXPECT_EQ(RenderExpr(Simplify(x - 1 < 0)), "x<1");
}

TEST_F(SymbolicTest, ConstantFoldingSemantics) {
  EXPECT_EQ(std::get<int64_t>(EvalAlu(Op::kIDiv, dtypes::kInt32, {int64_t{-7}, int64_t{2}})), -3);
  EXPECT_EQ(std::get<int64_t>(EvalAlu(Op::kMod, dtypes::kInt32, {int64_t{-7}, int64_t{2}})), -1);
  EXPECT_EQ(std::get<int64_t>(EvalAlu(Op::kIDiv, dtypes::kInt32, {int64_t{7}, int64_t{0}})), 0);
  EXPECT_EQ(std::get<int64_t>(EvalAlu(Op::kAdd, dtypes::kInt32,
                                      {int64_t{2147483647}, int64_t{1}})),
            -2147483648LL);
  EXPECT_EQ(std::get<int64_t>(EvalAlu(Op::kAdd, dtypes::kUInt8, {int64_t{250}, int64_t{10}})), 4);
  EXPECT_EQ(std::get<double>(EvalAlu(Op::kAdd, dtypes::kFloat32, {0.1, 0.2})),
            static_cast<double>(0.1f + 0.2f) == static_cast<double>(static_cast<float>(0.1 + 0.2))
                ? static_cast<double>(static_cast<float>(0.1 + 0.2))
                : static_cast<double>(static_cast<float>(0.1 + 0.2)));
  EXPECT_EQ(std::get<int64_t>(EvalAlu(Op::kCast, dtypes::kInt8, {300.7}, dtypes::kFloat32)), 127);
  EXPECT_EQ(std::get<int64_t>(EvalAlu(Op::kCast, dtypes::kInt32, {-2.9}, dtypes::kFloat32)), -2);
  EXPECT_EQ(std::get<double>(EvalAlu(Op::kCast, dtypes::kFloat16, {1.0 + 1.0 / 4096},
                                     dtypes::kFloat32)),
            1.0);
  EXPECT_EQ(std::get<int64_t>(EvalAlu(Op::kCmpLt, dtypes::kBool, {int64_t{-1}, int64_t{1}},
                                      dtypes::kUInt32)),
            0);  // unsigned: 0xffffffff... as uint64 is large
  EXPECT_EQ(Simplify(UOp::ConstFloat(2.0) * UOp::ConstFloat(3.0)), UOp::ConstFloat(6.0));
}

// A model can build ops EvalAlu does not define (ONNX BitwiseAnd / BitShift
// on float inputs, through Tensor::BitwiseAnd): constant folding leaves them
// for the device to refuse with a Status. It used to CHECK-fail in EvalAlu.
TEST_F(SymbolicTest, ConstantFoldingSkipsOpsUndefinedOnTheType) {
  UOpRef x = UOp::ConstFloat(1.5), y = UOp::ConstFloat(3.0);
  for (Op op : {Op::kAnd, Op::kOr, Op::kXor, Op::kShl, Op::kShr, Op::kIDiv, Op::kMod}) {
    UOpRef e = Alu(op, {x, y});
    EXPECT_FALSE(EvalAluDefined(op, dtypes::kFloat32)) << OpName(op);
    EXPECT_EQ(Simplify(e), e) << OpName(op);
    // Inside a foldable expression too.
    UOpRef c = UOp::Make(Op::kCast, dtypes::kInt32, {e}) + UOp::ConstInt(1, dtypes::kInt32);
    EXPECT_FALSE(Simplify(c)->IsConst()) << OpName(op);
  }
  UOpRef i = UOp::ConstInt(4, dtypes::kInt32);
  for (Op op : {Op::kExp2, Op::kLog2, Op::kSin, Op::kSqrt, Op::kRecip, Op::kTrunc}) {
    UOpRef e = Alu(op, {i});
    EXPECT_FALSE(EvalAluDefined(op, dtypes::kInt32)) << OpName(op);
    EXPECT_EQ(Simplify(e), e) << OpName(op);
  }
  EXPECT_EQ(Simplify(Alu(Op::kFDiv, {i, i})), Alu(Op::kFDiv, {i, i}));
  EXPECT_EQ(Simplify(Alu(Op::kPow, {i, i})), Alu(Op::kPow, {i, i}));
  // Defined combinations still fold.
  EXPECT_TRUE(EvalAluDefined(Op::kAnd, dtypes::kInt32));
  EXPECT_TRUE(EvalAluDefined(Op::kCmpLt, dtypes::kBool, dtypes::kFloat32));
  EXPECT_EQ(Simplify(Alu(Op::kXor, {i, UOp::ConstInt(1, dtypes::kInt32)})),
            UOp::ConstInt(5, dtypes::kInt32));
}

// Simplify marks the nodes it finished (UOp::IsRewriteFixpoint), so a later
// Simplify of a graph containing them does not walk them again; the result
// is the same as a walk of the whole graph would give.
TEST_F(SymbolicTest, FinishedNodesAreMarkedAndKeepTheirResult) {
  UOpRef e = ((a * 40 + b) / 20 + c % 10) * 3;
  UOpRef s = Simplify(e);
  EXPECT_TRUE(s->IsRewriteFixpoint(0));
  EXPECT_EQ(Simplify(s), s);
  EXPECT_FALSE(e->IsRewriteFixpoint(0));  // rewritten: not a fixpoint
  EXPECT_EQ(Simplify(e), s);
  // A graph built on top of a finished node still simplifies at its root.
  UOpRef bigger = (s + 0) % 100000;
  EXPECT_EQ(Simplify(bigger), Simplify(((a * 2 + c) * 3) % 100000));
  // Matchers without a bit mark nothing.
  PatternMatcher none({{UPat::Ops({Op::kAdd}), [](const Match&) { return UOpRef(); }, "noop"}});
  UOpRef fresh = UOp::Variable("fresh", 0, 3) + 1;
  GraphRewrite(fresh, none);
  EXPECT_FALSE(fresh->IsRewriteFixpoint(0));
}

// SimplifyNode applies the rules at one node whose sources are already
// simplified: a select on a constant, constant arithmetic.
TEST_F(SymbolicTest, SimplifyNodeFoldsAtTheRoot) {
  UOpRef x = UOp::Variable("x", 0, 7, dtypes::kInt32);
  UOpRef y = UOp::Variable("y", 0, 7, dtypes::kInt32);
  UOpRef no = UOp::Const(dtypes::kBool, int64_t{0});
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kWhere, dtypes::kInt32, {no, x, y})), y);
  UOpRef f = UOp::ConstFloat(0.0);
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kSub, dtypes::kFloat32, {f, f})), UOp::ConstFloat(0.0));
  EXPECT_EQ(SimplifyNode(x + y), x + y);  // nothing to fold
  // uint8's all-ones as a bitwise NOT builds it (-1): a select between it
  // and 0 is not a constant (its bounds are the type's, not [-1, -1]).
  UOpRef ones = UOp::ConstInt(-1, dtypes::kUInt8), zero = UOp::ConstInt(0, dtypes::kUInt8);
  UOpRef live = UOp::Make(Op::kCmpLt, dtypes::kBool, {x, UOp::ConstInt(3, dtypes::kInt32)});
  UOpRef sel = UOp::Make(Op::kWhere, dtypes::kUInt8, {live, ones, zero});
  EXPECT_EQ(SimplifyNode(sel), sel);
  EXPECT_EQ(Simplify(sel), sel);
}

// Vector ops over broadcasts (a VECTORIZE of one node in every lane, as a
// constant lowered at a vector width) fold like their scalars: the op on
// the scalar, broadcast; a select on a broadcast constant picks its branch;
// adding 0 or multiplying by 1 in every lane is the other operand.
TEST_F(SymbolicTest, BroadcastsFoldLikeTheirScalars) {
  auto bc = [](const UOpRef& x) {
    return UOp::Make(Op::kVectorize, x->dtype().Vec(8), UOpList(8, x));
  };
  const DType f8 = dtypes::kFloat32.Vec(8);
  UOpRef zero = bc(UOp::ConstFloat(0.0)), one = bc(UOp::ConstFloat(1.0));
  UOpRef neg = bc(UOp::ConstFloat(-1.0));
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kSub, f8, {zero, zero})), zero);
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kMul, f8, {neg, one})), neg);
  // A lane-varying vector (lanes 0..7 of a load index) keeps its own op.
  UOpList lanes;
  for (int64_t l = 0; l < 8; ++l) lanes.push_back(UOp::ConstFloat(static_cast<double>(l)));
  UOpRef ramp = UOp::Make(Op::kVectorize, f8, lanes);
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kAdd, f8, {ramp, zero})), ramp);
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kAdd, f8, {zero, ramp})), ramp);
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kMul, f8, {ramp, one})), ramp);
  UOpRef doubled = UOp::Make(Op::kMul, f8, {ramp, bc(UOp::ConstFloat(2.0))});
  EXPECT_EQ(SimplifyNode(doubled), doubled);
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kSub, f8, {zero, ramp})),
            UOp::Make(Op::kSub, f8, {zero, ramp}));  // 0 - x is not x
  // Selects on a broadcast constant; on a lane-varying condition, kept.
  const DType b8 = dtypes::kBool.Vec(8);
  UOpRef no = bc(UOp::Const(dtypes::kBool, int64_t{0}));
  UOpRef yes = bc(UOp::Const(dtypes::kBool, int64_t{1}));
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kWhere, f8, {no, ramp, neg})), neg);
  EXPECT_EQ(SimplifyNode(UOp::Make(Op::kWhere, f8, {yes, ramp, neg})), ramp);
  // A select between broadcasts on a broadcast of a variable condition is
  // the scalar select, broadcast.
  UOpRef x = UOp::Variable("x", 0, 7, dtypes::kInt32);
  UOpRef live = UOp::Make(Op::kCmpLt, dtypes::kBool, {x, UOp::ConstInt(3, dtypes::kInt32)});
  UOpRef sel = SimplifyNode(UOp::Make(Op::kWhere, f8, {bc(live), one, zero}));
  EXPECT_EQ(sel, bc(UOp::Make(Op::kWhere, dtypes::kFloat32,
                              {live, UOp::ConstFloat(1.0), UOp::ConstFloat(0.0)})));
  UOpList gates;
  for (int64_t l = 0; l < 8; ++l) gates.push_back(UOp::Const(dtypes::kBool, l % 2));
  UOpRef mixed = UOp::Make(Op::kWhere, f8, {UOp::Make(Op::kVectorize, b8, gates), one, zero});
  EXPECT_EQ(SimplifyNode(mixed), mixed);
}

}  // namespace
}  // namespace kiln
