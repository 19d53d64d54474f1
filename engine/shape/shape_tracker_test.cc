#include "engine/shape/shape_tracker.h"

#include <functional>
#include <random>

#include "engine/uop/symbolic.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using Strides = std::vector<int64_t>;

// Evaluates the tracker's index / valid for every element by substituting
// constants, and compares with a reference computed on an explicit array.
std::vector<int64_t> Eval(const ShapeTracker& st) {
  std::vector<int64_t> out;
  Shape s = st.shape();
  int64_t n = Prod(s);
  for (int64_t flat = 0; flat < n; ++flat) {
    UOpList idxs(s.size());
    int64_t rem = flat;
    for (size_t d = s.size(); d-- > 0;) {
      idxs[d] = UOp::ConstInt(rem % s[d]);
      rem /= s[d];
    }
    auto [idx, valid] = st.ToIndex(idxs);
    EXPECT_TRUE(idx->IsConst() && valid->IsConst()) << RenderExpr(idx);
    out.push_back(valid->IsConstInt(1) ? std::get<int64_t>(idx->const_value()) : -1);
  }
  return out;
}

TEST(ShapeTrackerTest, IssueExample) {
  ShapeTracker st = ShapeTracker::FromShape({10, 10}).Permute({1, 0});
  EXPECT_EQ(*st.SingleViewStrides(), (Strides{1, 10}));
  ShapeTracker r = st.Reshape({5, 2, 5, 2});
  EXPECT_EQ(r.views().size(), 1u);
  EXPECT_EQ(*r.SingleViewStrides(), (Strides{2, 1, 20, 10}));
  ShapeTracker flat = r.Reshape({100});
  EXPECT_EQ(flat.views().size(), 2u);
  auto [idx, valid] = flat.ToIndexVars();
  EXPECT_EQ(RenderExpr(idx), "((idx0%10)*10)+(idx0//10)");
  EXPECT_TRUE(valid->IsConstInt(1));
}

TEST(ShapeTrackerTest, ZeroCopyOps) {
  ShapeTracker st = ShapeTracker::FromShape({2, 3});
  EXPECT_TRUE(st.contiguous());
  EXPECT_EQ(Eval(st), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(Eval(st.Permute({1, 0})), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(Eval(st.Flip({false, true})), (std::vector<int64_t>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(Eval(st.Shrink({{1, 2}, {1, 3}})), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(Eval(st.Pad({{0, 0}, {1, 1}})),
            (std::vector<int64_t>{-1, 0, 1, 2, -1, -1, 3, 4, 5, -1}));
  EXPECT_EQ(Eval(st.Stride({1, 2})), (std::vector<int64_t>{0, 2, 3, 5}));
  ShapeTracker e = ShapeTracker::FromShape({1, 3}).Expand({2, 3});
  EXPECT_EQ(Eval(e), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(st.Pad({{0, 0}, {1, 1}}).views().size(), 1u);
}

TEST(ShapeTrackerTest, ExtendBroadcastReadsTheSameElements) {
  // A row broadcast along dim 0 grown from 2 to 4 rows: no mask appears.
  ShapeTracker e = ShapeTracker::FromShape({1, 3}).Expand({2, 3});
  EXPECT_EQ(Eval(e.ExtendBroadcast(0, 4)), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}));
  // A dim's own mask range is kept: the new indices stay outside it.
  ShapeTracker m = ShapeTracker::FromShape({1, 3}).Pad({{1, 0}, {0, 0}}).Expand({2, 3});
  EXPECT_EQ(Eval(m), (std::vector<int64_t>{-1, -1, -1, 0, 1, 2}));
  EXPECT_EQ(Eval(m.ExtendBroadcast(0, 3)), (std::vector<int64_t>{-1, -1, -1, 0, 1, 2, -1, -1, -1}));
}

TEST(ShapeTrackerTest, ReshapeMergesAndSplits) {
  ShapeTracker st = ShapeTracker::FromShape({4, 6}).Permute({1, 0}).Reshape({3, 2, 4});
  EXPECT_EQ(st.views().size(), 1u);
  EXPECT_EQ(*st.SingleViewStrides(), (Strides{2, 1, 6}));
  // Expanded dims merge.
  ShapeTracker ex = ShapeTracker::FromShape({1, 1}).Expand({4, 5}).Reshape({20});
  EXPECT_EQ(ex.views().size(), 1u);
  EXPECT_EQ(Eval(ex), std::vector<int64_t>(20, 0));
  // A padded dim reshaped 1:1 with extra unit dims keeps one view.
  ShapeTracker p = ShapeTracker::FromShape({3}).Pad({{1, 1}}).Reshape({1, 5, 1});
  EXPECT_EQ(p.views().size(), 1u);
  EXPECT_EQ(Eval(p), (std::vector<int64_t>{-1, 0, 1, 2, -1}));
}

// Random chains of movement ops checked against an explicit reference array.
TEST(ShapeTrackerTest, RandomChainsMatchReference) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    Shape shape = {static_cast<int64_t>(rng() % 4 + 1), static_cast<int64_t>(rng() % 4 + 1),
                   static_cast<int64_t>(rng() % 3 + 1)};
    ShapeTracker st = ShapeTracker::FromShape(shape);
    // Reference: an explicit array of buffer indices (-1 = padding).
    std::vector<int64_t> ref(Prod(shape));
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = static_cast<int64_t>(i);
    Shape rs = shape;
    for (int step = 0; step < 4; ++step) {
      int op = rng() % 5;
      std::vector<int64_t> nref;
      if (op == 0 && rs.size() == 3) {  // permute (2,0,1)
        Shape ns = {rs[2], rs[0], rs[1]};
        for (int64_t a = 0; a < ns[0]; ++a)
          for (int64_t b = 0; b < ns[1]; ++b)
            for (int64_t c = 0; c < ns[2]; ++c) nref.push_back(ref[(b * rs[1] + c) * rs[2] + a]);
        st = st.Permute({2, 0, 1});
        rs = ns;
      } else if (op == 1 && rs.size() == 3) {  // pad dim 1 by (1, 2)
        Shape ns = {rs[0], rs[1] + 3, rs[2]};
        for (int64_t a = 0; a < ns[0]; ++a)
          for (int64_t b = 0; b < ns[1]; ++b)
            for (int64_t c = 0; c < ns[2]; ++c)
              nref.push_back(b >= 1 && b < rs[1] + 1 ? ref[(a * rs[1] + b - 1) * rs[2] + c] : -1);
        st = st.Pad({{0, 0}, {1, 2}, {0, 0}});
        rs = ns;
      } else if (op == 2 && rs.size() == 3 && rs[0] > 1) {  // shrink dim 0 to [1, n)
        Shape ns = {rs[0] - 1, rs[1], rs[2]};
        for (int64_t i = rs[1] * rs[2]; i < static_cast<int64_t>(ref.size()); ++i)
          nref.push_back(ref[i]);
        st = st.Shrink({{1, rs[0]}, {0, rs[1]}, {0, rs[2]}});
        rs = ns;
      } else if (op == 3 && rs.size() == 3) {  // flip dim 2
        for (int64_t a = 0; a < rs[0] * rs[1]; ++a)
          for (int64_t c = rs[2]; c-- > 0;) nref.push_back(ref[a * rs[2] + c]);
        st = st.Flip({false, false, true});
      } else {  // reshape: merge two dims and split back differently
        int64_t n = Prod(rs);
        Shape ns = n % 2 == 0 ? Shape{2, n / 2, 1} : Shape{1, n, 1};
        nref = ref;
        st = st.Reshape(ns);
        rs = ns;
      }
      ref = nref;
      ASSERT_EQ(st.shape(), rs);
      ASSERT_EQ(Eval(st), ref) << st.ToString();
      // ToValid builds the same validity as ToIndex, without the address.
      UOpList vars;
      for (size_t i = 0; i < st.ndim(); ++i)
        vars.push_back(UOp::Variable("idx" + std::to_string(i), 0,
                                     std::max<int64_t>(st.shape()[i] - 1, 0)));
      ASSERT_EQ(st.ToValid(vars), st.ToIndex(vars).second) << st.ToString();
    }
  }
}

TEST(ShapeTrackerTest, RealSizeAndMask) {
  ShapeTracker st = ShapeTracker::FromShape({4, 4}).Shrink({{1, 3}, {0, 2}});
  EXPECT_EQ(st.RealSize(), 10);  // max index 2*4+1 = 9
  EXPECT_FALSE(st.HasMask());
  EXPECT_TRUE(st.Pad({{1, 0}, {0, 0}}).HasMask());
}

TEST(ShapeTrackerTest, ArgInterning) {
  ShapeTracker a = ShapeTracker::FromShape({3, 4}).Permute({1, 0});
  ShapeTracker b = ShapeTracker::FromShape({3, 4}).Permute({1, 0});
  UOpRef u1 = UOp::Make(Op::kValid, dtypes::kBool, {}, Arg(StArg(a)));
  UOpRef u2 = UOp::Make(Op::kValid, dtypes::kBool, {}, Arg(StArg(b)));
  EXPECT_EQ(u1, u2);
  ASSERT_NE(StOf(*u1), nullptr);
  EXPECT_EQ(StOf(*u1)->shape(), (Shape{4, 3}));
}

}  // namespace
}  // namespace kiln
