#include "engine/codegen/float_rules.h"

#include <cmath>
#include <string>
#include <variant>

#include "gtest/gtest.h"

namespace kiln {
namespace {

class FloatRulesTest : public ::testing::Test {
 protected:
  UOpRef Arg(int i, DType t = dtypes::kFloat32) {
    return UOp::Make(Op::kDefineVar, t, {}, std::string("v") + std::to_string(i));
  }
  UOpRef a = Arg(0), b = Arg(1), c = Arg(2);
};

TEST_F(FloatRulesTest, MultiplyAddsContract) {
  UOpRef ab = Alu(Op::kMul, {a, b});
  EXPECT_EQ(RewriteFloatNode(Alu(Op::kAdd, {ab, c})), Alu(Op::kMulAcc, {a, b, c}));
  EXPECT_EQ(RewriteFloatNode(Alu(Op::kAdd, {c, ab})), Alu(Op::kMulAcc, {a, b, c}));
  EXPECT_EQ(RewriteFloatNode(Alu(Op::kSub, {ab, c})),
            Alu(Op::kMulAcc, {a, b, Alu(Op::kNeg, {c})}));
  EXPECT_EQ(RewriteFloatNode(Alu(Op::kSub, {c, ab})),
            Alu(Op::kMulAcc, {Alu(Op::kNeg, {a}), b, c}));
  // A subtracted constant is negated in place.
  UOpRef two = UOp::ConstFloat(2.0);
  EXPECT_EQ(RewriteFloatNode(Alu(Op::kSub, {ab, two})),
            Alu(Op::kMulAcc, {a, b, UOp::ConstFloat(-2.0)}));
  // No multiply, nothing to contract.
  EXPECT_EQ(RewriteFloatNode(Alu(Op::kAdd, {a, c})), nullptr);
}

TEST_F(FloatRulesTest, OnlyFloat32AndFloat64Scalars) {
  for (DType t : {dtypes::kFloat16, dtypes::kBFloat16, dtypes::kInt32}) {
    UOpRef x = Arg(0, t), y = Arg(1, t);
    EXPECT_EQ(RewriteFloatNode(Alu(Op::kAdd, {Alu(Op::kMul, {x, y}), y})), nullptr)
        << t.Name();
  }
  UOpRef x = Arg(0, dtypes::kFloat64), y = Arg(1, dtypes::kFloat64);
  EXPECT_NE(RewriteFloatNode(Alu(Op::kAdd, {Alu(Op::kMul, {x, y}), y})), nullptr);
  // A multiply in float16 cast up and added in float32 keeps both roundings.
  UOpRef h = Alu(Op::kMul, {Arg(0, dtypes::kFloat16), Arg(1, dtypes::kFloat16)});
  UOpRef up = UOp::Make(Op::kCast, dtypes::kFloat32, {h});
  EXPECT_EQ(RewriteFloatNode(Alu(Op::kAdd, {up, c})), nullptr);
}

double ConstOf(const UOpRef& u) { return std::get<double>(u->const_value()); }

TEST_F(FloatRulesTest, DivisionByAConstantMultipliesByItsReciprocal) {
  UOpRef r = RewriteFloatNode(Alu(Op::kFDiv, {a, UOp::ConstFloat(3.0)}));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->op(), Op::kMul);
  EXPECT_EQ(r->src(0), a);
  EXPECT_EQ(ConstOf(r->src(1)), static_cast<double>(1.0f / 3.0f));
  UOpRef x = Arg(0, dtypes::kFloat64);
  r = RewriteFloatNode(Alu(Op::kFDiv, {x, UOp::ConstFloat(3.0, dtypes::kFloat64)}));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(ConstOf(r->src(1)), 1.0 / 3.0);
  // Kept as divisions: by 0 and infinity, and where the reciprocal
  // overflows or is subnormal in the node's type.
  for (double c : {0.0, -0.0, double{INFINITY}, 1e-39, 1e38, double{NAN}})
    EXPECT_EQ(RewriteFloatNode(Alu(Op::kFDiv, {a, UOp::ConstFloat(c)})), nullptr) << c;
  EXPECT_NE(RewriteFloatNode(Alu(Op::kFDiv, {x, UOp::ConstFloat(1e38, dtypes::kFloat64)})),
            nullptr);
  // A division by a variable stays.
  EXPECT_EQ(RewriteFloatNode(Alu(Op::kFDiv, {a, b})), nullptr);
}

}  // namespace
}  // namespace kiln
