#include "engine/uop/uop.h"

#include <thread>

#include "engine/uop/pattern.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

TEST(UOpTest, InterningGivesSamePointer) {
  UOpRef a = UOp::Variable("a", 0, 10);
  UOpRef b = UOp::Variable("b", 0, 10);
  UOpRef x1 = (a + b) * 3;
  UOpRef x2 = (a + b) * 3;
  EXPECT_EQ(x1, x2);
  EXPECT_NE(x1, (b + a) * 3);
  EXPECT_EQ(UOp::ConstFloat(1.5), UOp::ConstFloat(1.5));
  EXPECT_NE(UOp::ConstFloat(1.5), UOp::ConstFloat(1.5, dtypes::kFloat64));
  EXPECT_NE(UOp::ConstFloat(0.0), UOp::ConstFloat(-0.0));
}

TEST(UOpTest, FreedWhenUnused) {
  size_t before = LiveUOpCount();
  {
    UOpRef v = UOp::Variable("tmp_var_xyz", 0, 5);
    UOpRef e = v * 7 + 3;
    EXPECT_GT(LiveUOpCount(), before);
  }
  EXPECT_EQ(LiveUOpCount(), before);
}

// The intern table grows past many thousands of nodes, forgets freed ones
// (their slots reused) and still finds every live node: a node made again
// while its first copy lives is that copy, and one made after it was freed
// is new and interned in turn.
TEST(UOpTest, InterningSurvivesGrowthAndFrees) {
  const size_t before = LiveUOpCount();
  UOpRef v = UOp::Variable("grow_var", 0, 1 << 20);
  std::vector<UOpRef> kept;
  for (int round = 0; round < 3; ++round) {
    std::vector<UOpRef> made;
    for (int i = 0; i < 20000; ++i) made.push_back(v * (i + 2) + round);
    for (int i = 0; i < 20000; i += 97) kept.push_back(made[i]);
    // Same structure, same node, while it lives.
    for (int i = 0; i < 20000; i += 501) EXPECT_EQ(v * (i + 2) + round, made[i]);
  }  // the others are freed
  // The kept sums and what they hold (their products and constants); the
  // 60,000 others are gone.
  EXPECT_GT(LiveUOpCount(), before + kept.size());
  EXPECT_LT(LiveUOpCount(), before + 4 * kept.size() + 16);
  for (const UOpRef& k : kept) {
    const UOp* raw = k.get();
    EXPECT_EQ(UOp::Make(k->op(), k->dtype(), k->src(), k->arg()).get(), raw);
  }
  UOpRef again = v * 3 + 0;  // freed above (i = 1 was not kept): made anew, then interned
  EXPECT_EQ(v * 3 + 0, again);
}

TEST(UOpTest, ConcurrentMakeInterns) {
  std::vector<UOpRef> results(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &results] {
      UOpRef v = UOp::Variable("shared", 0, 100);
      UOpRef e;
      for (int i = 0; i < 200; ++i) e = v * i + i;
      results[t] = e;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 1; t < 8; ++t) EXPECT_EQ(results[t], results[0]);
}

TEST(UOpTest, BoundsAndToposort) {
  UOpRef a = UOp::Variable("a", 0, 10);
  UOpRef e = a * 10;
  EXPECT_EQ(e->vmin(), 0);
  EXPECT_EQ(e->vmax(), 100);
  EXPECT_EQ((a - 20)->vmin(), -20);
  EXPECT_EQ((a % 4)->vmax(), 3);
  EXPECT_EQ((a / 3)->vmax(), 3);
  EXPECT_EQ((a < 11)->vmin(), 1);
  auto order = Toposort(e);
  ASSERT_EQ(order.back(), e.get());
  for (size_t i = 0; i < order.size(); ++i)
    for (const UOpRef& s : order[i]->src())
      EXPECT_LT(std::find(order.begin(), order.end(), s.get()) - order.begin(),
                static_cast<long>(i));
}

TEST(PatternTest, MatchAndRewrite) {
  PatternMatcher pm({{UPat::Alu(Op::kMul, {UPat::Var("x"), UPat::ConstVal(2)}).Commutative(),
                      [](const Match& m) { return m["x"] + m["x"]; }, "x*2"}});
  UOpRef a = UOp::Variable("a", 0, 10);
  UOpRef e = UOp::ConstInt(2) * a;
  EXPECT_EQ(GraphRewrite(e, pm), a + a);
  // Nested: rewrites inside.
  EXPECT_EQ(GraphRewrite((a * 2) * 2, pm), (a + a) + (a + a));
  // Same name must bind the same node.
  PatternMatcher same({{UPat::Alu(Op::kSub, {UPat::Var("x"), UPat::Var("x")}),
                        [](const Match& m) { return UOp::ConstInt(0); }, "x-x"}});
  EXPECT_EQ(GraphRewrite(a - a, same), UOp::ConstInt(0));
  UOpRef b = UOp::Variable("b", 0, 10);
  EXPECT_EQ(GraphRewrite(a - b, same), a - b);
}

TEST(PatternTest, Substitute) {
  UOpRef a = UOp::Variable("a", 0, 10);
  UOpRef e = a * 3 + 1;
  EXPECT_EQ(Substitute(e, {{a.get(), UOp::ConstInt(2)}}), UOp::ConstInt(2) * 3 + 1);
}

}  // namespace
}  // namespace kiln
