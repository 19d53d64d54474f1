#include "engine/uop/symbolic.h"

#include <cmath>

#include "gtest/gtest.h"

namespace kiln {
namespace {

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

}  // namespace
}  // namespace kiln
