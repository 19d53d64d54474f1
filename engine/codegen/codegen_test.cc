// Kernel-level tests: fusion counts, golden kernel sources (so codegen
// changes show up in review), cost estimates and CPU == interpreter checks.
//
// To update the golden files after an intended codegen change:
//   bazel run //engine/codegen:codegen_test -- --update_golden
#include <cmath>
#include <cstdlib>
#include <functional>
#include <tuple>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/codegen/kernel.h"
#include "engine/codegen/lowerer.h"
#include "engine/renderer/renderer.h"
#include "engine/schedule/schedule.h"
#include "engine/schedule/schedule_testing.h"
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

bool update_golden = false;

std::string Source(const ScheduleItem& item, const std::string& name) {
  auto k = Kernel::Create(item.ast, RendererOptions{});
  EXPECT_TRUE(k.ok()) << k.status();
  k->HandCodedOptimizations();
  auto p = Lower(*k);
  EXPECT_TRUE(p.ok()) << p.status();
  return RenderC(name, p->uops);
}

void CheckGolden(const std::string& file, const std::string& got) {
  std::string rel = "engine/codegen/testdata/" + file;
  if (update_golden) {
    const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
    ASSERT_NE(ws, nullptr) << "--update_golden needs `bazel run`";
    std::ofstream(std::string(ws) + "/" + rel) << got;
    return;
  }
  std::ifstream in(rel);
  ASSERT_TRUE(in.good()) << "missing golden file " << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(got, ss.str()) << "golden kernel " << rel
                           << " changed; review and run with --update_golden";
}

class CodegenTest : public ::testing::Test {
 protected:
  Engine* e = TestEngine();
  Tensor A(Shape s) { return Tensor::Empty(e, s, dtypes::kFloat32); }
};

TEST_F(CodegenTest, ElementwiseChainIsOneKernel) {
  Tensor a = A({16, 16}), b = A({16, 16}), c = A({16});
  Schedule s = Sched({((a + b) * c).Exp().Relu()});
  EXPECT_EQ(s.items.size(), 1u);
}

TEST_F(CodegenTest, ReduceFusesInputAndOutput) {
  Tensor a = A({8, 32}), b = A({8, 32});
  EXPECT_EQ(Sched({(a * b).Sum({1})}).items.size(), 1u);
  EXPECT_EQ(Sched({(a * b).Sum({1}).Sqrt() + 1.0}).items.size(), 1u);
  // A reduce seen through an expand is realized, and softmax stores its
  // exponentials once: 4 kernels (max, exp, sum, division).
  EXPECT_EQ(Sched({a.Softmax(-1)}).items.size(), 4u);
}

TEST_F(CodegenTest, ConvLikeReduceThenReshapeFusesBias) {
  Tensor a = A({4, 6, 5}), w = A({6, 5}), bias = A({4});
  Tensor r = (a * w).Sum({1, 2}, true).Reshape({4}) + bias;
  EXPECT_EQ(Sched({r}).items.size(), 1u);
}

// A padded copy of a computed value (a convolution's input): the value is
// computed into the interior without masks, the border is filled apart.
TEST_F(CodegenTest, PaddedCopyComputesIntoTheInterior) {
  Tensor a = A({4, 6});
  Tensor hs = a * (a + 3.0).Relu();  // uses `a` twice
  Schedule s = Sched({hs.Pad({{1, 1}, {2, 0}}).Contiguous()});
  // Border slabs: rows 0 and 5 (full width), columns 0..1 of rows 1..4.
  ASSERT_EQ(s.items.size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    const ShapeTracker* st = StOf(*s.items[i].ast->src(0));
    EXPECT_FALSE(st->HasMask()) << st->ToString();
  }
  std::string src = Source(s.items[3], "interior");
  EXPECT_EQ(src.find("?data"), std::string::npos) << "no gated loads expected:\n" << src;
  // A reduce used twice by one kernel (through a reshape) is not realized.
  Tensor w = A({6, 5});
  Tensor conv = (A({4, 6, 1}) * w.Reshape({1, 6, 5})).Sum({1}).Reshape({4, 5});
  EXPECT_EQ(Sched({conv * (conv + 3.0).Relu()}).items.size(), 1u);
  // Feeding a padded copy, it is: a reduce kernel storing into the padded
  // buffer's interior loses its contiguous rows (slower on CPUs), so the
  // reduce keeps its own kernel and the activation fills the interior.
  Tensor act = conv * (conv + 3.0).Relu();
  EXPECT_EQ(Sched({act.Pad({{1, 1}, {1, 1}}).Contiguous()}).items.size(), 5u);
}

// An activation reading its input twice (SiLU: x * sigmoid(x)) after a
// reduce, read by two kernels (a pooling and a product): the reduce's kernel
// stores the activation, and neither reader recomputes its exp.
TEST_F(CodegenTest, ReduceKernelStoresAnActivationReadTwice) {
  Tensor x = A({4, 6, 1}), w = A({1, 6, 5}), bias = A({5});
  Tensor conv = (x * w).Sum({1}).Reshape({4, 5}) + bias;
  Tensor act = conv * conv.Sigmoid();
  Schedule s = Sched({act.Sum({1}), act * 2.0});
  ASSERT_EQ(s.items.size(), 3u);
  std::vector<int> exps;
  for (const ScheduleItem& item : s.items) {
    int n = 0;
    for (const UOp* u : Toposort(item.ast)) n += u->op() == Op::kExp2;
    exps.push_back(n);
  }
  EXPECT_EQ(exps, (std::vector<int>{1, 0, 0}));
}

TEST_F(CodegenTest, MemoryPlannerReusesIntermediates) {
  Tensor t = A({64, 64});
  for (int i = 0; i < 6; ++i) t = (t + 1.0).Contiguous();
  Schedule s = Sched({t});
  EXPECT_EQ(s.items.size(), 6u);
  // Five intermediates of the same size, but only two are alive at a time.
  EXPECT_EQ(s.intermediates.size(), 2u);
}

TEST_F(CodegenTest, GoldenAdd) {
  Schedule s = Sched({A({37}) + A({37})});
  CheckGolden("add.c", Source(s.items[0], "add"));
}

TEST_F(CodegenTest, GoldenFusedElementwise) {
  Tensor a = A({4, 64}), b = A({64});
  Schedule s = Sched({((a * b) + 1.0).Maximum(a.ZerosLike()).Sqrt()});
  CheckGolden("fused.c", Source(s.items[0], "fused"));
}

TEST_F(CodegenTest, GoldenReduce) {
  Schedule s = Sched({A({16, 256}).Sum({1})});
  CheckGolden("reduce.c", Source(s.items[0], "reduce"));
}

TEST_F(CodegenTest, GoldenMatmul) {
  Schedule s = Sched({A({64, 32}).Matmul(A({32, 64}))});
  ASSERT_EQ(s.items.size(), 1u);
  CheckGolden("matmul.c", Source(s.items[0], "matmul"));
}

// The CPU's index arithmetic (loop counters and what is computed from them
// and constants) is 64-bit, so clang folds it into addresses; an index
// loaded from memory, and an int32 tensor's own arithmetic, stay int.
TEST_F(CodegenTest, CpuIndexArithmeticIs64Bit) {
  Tensor idx = Tensor::Empty(e, {8}, dtypes::kInt32);
  std::string take = Source(Sched({A({50, 16}).IndexSelect(0, idx)}).items.back(), "take");
  EXPECT_NE(take.find("for (long long ridx"), std::string::npos) << take;
  EXPECT_NE(take.find("int val"), std::string::npos) << take;
  // (5 lanes: scalar code, where a 64-bit type could leak into the values.)
  Tensor a = Tensor::Empty(e, {5}, dtypes::kInt32);
  std::string arith = Source(Sched({(a * a + 7).Contiguous()}).items[0], "arith");
  EXPECT_NE(arith.find("for (long long ridx"), std::string::npos) << arith;
  EXPECT_NE(arith.find("int val"), std::string::npos) << arith;
  EXPECT_EQ(arith.find("long long alu"), std::string::npos) << arith;
}

// Lowering ends with a spec check of the program (linear_program.h); each
// broken rule is caught and named.
TEST_F(CodegenTest, LinearProgramCheckCatchesBrokenPrograms) {
  Schedule s = Sched({A({16, 256}).Sum({1})});
  auto k = Kernel::Create(s.items[0].ast, RendererOptions{});
  ASSERT_TRUE(k.ok()) << k.status();
  k->HandCodedOptimizations();
  auto p = Lower(*k);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(CheckLinearProgram(*p).ok());
  auto first = [&](Op op) {
    for (size_t i = 0; i < p->uops.size(); ++i)
      if (p->uops[i]->op() == op) return i;
    return p->uops.size();
  };
  auto broken = [&](const std::function<void(UOpList*)>& edit) {
    LinearProgram q = *p;
    edit(&q.uops);
    return std::string(CheckLinearProgram(q).message());
  };
  const size_t end = first(Op::kEndRange), store = first(Op::kStore);
  ASSERT_LT(end, p->uops.size());
  ASSERT_LT(store, p->uops.size());
  size_t last_end = 0;
  for (size_t i = 0; i < p->uops.size(); ++i)
    if (p->uops[i]->op() == Op::kEndRange) last_end = i;
  EXPECT_NE(broken([&](UOpList* u) { u->erase(u->begin() + last_end); }).find("never closed"),
            std::string::npos);
  // The store moved before what it stores is computed.
  EXPECT_NE(broken([&](UOpList* u) {
              UOpRef st = (*u)[store];
              u->erase(u->begin() + store);
              u->insert(u->begin() + p->num_bufs, st);
            }).find("not defined here"),
            std::string::npos);
  // A value made inside the loop used after it: the loop closed before the
  // last use of its index.
  size_t range = first(Op::kRange);
  EXPECT_NE(broken([&](UOpList* u) {
              UOpRef close = (*u)[end];
              u->erase(u->begin() + end);
              u->insert(u->begin() + range + 1, close);
            }).find("not defined here"),
            std::string::npos);
  EXPECT_NE(broken([&](UOpList* u) { std::swap((*u)[0], (*u)[1]); }).find("parameter order"),
            std::string::npos);
}

TEST_F(CodegenTest, MatmulEstimates) {
  Schedule s = Sched({A({64, 32}).Matmul(A({32, 48}))});
  auto k = Kernel::Create(s.items[0].ast, RendererOptions{});
  ASSERT_TRUE(k.ok());
  k->HandCodedOptimizations();
  auto p = Lower(*k);
  ASSERT_TRUE(p.ok());
  EstimateCosts(&*p, {64 * 48 * 4, 64 * 32 * 4, 32 * 48 * 4});
  EXPECT_DOUBLE_EQ(p->flops, 2.0 * 64 * 48 * 32);
  EXPECT_DOUBLE_EQ(p->bytes, 4.0 * (64 * 48 + 64 * 32 + 32 * 48));
}

TEST_F(CodegenTest, NoOptGivesSameResultsAsOptimized) {
  // The same graph with and without optimizations, on both devices.
  std::vector<float> av(12 * 20), bv(20 * 16);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i % 5) - 2;
  std::vector<double> ref;
  for (const char* dev : {"CPU", "INTERP"}) {
    Tensor a = Tensor::FromFloats(e, av, {12, 20}, dev);
    Tensor b = Tensor::FromFloats(e, bv, {20, 16}, dev);
    std::vector<double> got = Values((a.Matmul(b) + 1.0).Relu().Sum({0}));
    if (ref.empty()) ref = got;
    ExpectNear(got, ref);
  }
}

// The heuristics' opts of the one reduce kernel of `t`'s schedule.
std::vector<Opt> ReduceOpts(const Tensor& t) {
  Schedule s = Sched({t});
  for (const ScheduleItem& item : s.items) {
    auto k = Kernel::Create(item.ast, RendererOptions{});
    EXPECT_TRUE(k.ok()) << k.status();
    if (!k.ok() || k->reduce() == nullptr) continue;
    k->HandCodedOptimizations();
    return k->applied();
  }
  ADD_FAILURE() << "no reduce kernel";
  return {};
}

bool Has(const std::vector<Opt>& opts, OptOp op, int64_t amount) {
  for (const Opt& o : opts)
    if (o.op == op && o.amount == amount) return true;
  return false;
}

// CPU (optimized) against the interpreter (the definition of the ops).
// Realized first: reading float64 values would fuse the cast into the
// kernel under test (a float64 store changes its vector width).
void ExpectCpuMatchesInterp(const std::function<Tensor(const std::string&)>& build) {
  ExpectNear(Values(build("CPU").Contiguous()), Values(build("INTERP").Contiguous()), 1e-4, 1e-4);
}

// A reduce feeding a padded copy with short rows (a 1x1 convolution on a
// 7-wide map before a 3x3 one) keeps its own buffer with the rows merged;
// the padded copy copies it (border fills and an unmasked interior copy).
// Rows of 32 or more are computed straight into the interior.
TEST_F(CodegenTest, ShortRowReduceIsCopiedIntoItsPadding) {
  auto build = [&](Tensor x, Tensor w, int64_t width) {
    Tensor conv = (w.Reshape({8, 6, 1}) * x.Reshape({1, 6, 7 * width})).Sum({1});
    return conv.Reshape({8, 7, width}).Relu().Pad({{0, 0}, {1, 1}, {1, 1}}).Contiguous();
  };
  for (int64_t width : {7, 40}) {
    SCOPED_TRACE(width);
    Schedule s = Sched({build(A({6, 7 * width}), A({8, 6}), width)});
    int reduces = 0, masked_loads = 0;
    for (const ScheduleItem& item : s.items)
      for (const UOp* u : Toposort(item.ast)) {
        reduces += u->op() == Op::kReduceAxis;
        if (u->op() == Op::kLoad && StOf(*u) && StOf(*u)->HasMask()) ++masked_loads;
      }
    EXPECT_EQ(reduces, 1);
    EXPECT_EQ(masked_loads, 0);
    // 3 border kernels (top, bottom, the column seam), the interior, and
    // for short rows the reduce's own kernel.
    EXPECT_EQ(s.items.size(), width < 32 ? 5u : 4u);
  }
  ExpectCpuMatchesInterp([&](const std::string& dev) {
    return build(Tensor::Randn(e, {6, 49}, 1, dtypes::kFloat32, dev),
                 Tensor::Randn(e, {8, 6}, 2, dtypes::kFloat32, dev), 7);
  });
}

// The left and right padding of a map's rows is one kernel (a seam: the
// right padding of row r and the left padding of row r + 1 as one run per
// row) when the rows are padded above and below; else two column slabs.
TEST_F(CodegenTest, BorderColumnsAreOneSeam) {
  auto build = [&](const std::string& dev, const Pads& pads) {
    Tensor x = Tensor::Randn(e, {3, 4, 5}, 3, dtypes::kFloat32, dev);
    return (x * 2.0).Relu().Pad(pads).Contiguous();
  };
  const Pads seam = {{0, 0}, {1, 2}, {2, 1}}, slabs = {{0, 0}, {0, 2}, {2, 1}};
  auto count = [&](const Pads& pads) {
    return Sched({(A({3, 4, 5}) * 2.0).Relu().Pad(pads).Contiguous()}).items.size();
  };
  // Top, bottom, the seam, the interior; without a top row: bottom, left,
  // right, the interior; with a channel padded too, its slab first.
  EXPECT_EQ(count(seam), 4u);
  EXPECT_EQ(count(slabs), 4u);
  EXPECT_EQ(count({{1, 0}, {1, 1}, {1, 1}}), 5u);
  Schedule s = Sched({(A({3, 4, 5}) * 2.0).Relu().Pad(seam).Contiguous()});
  bool found = false;
  for (const ScheduleItem& item : s.items) {
    const ShapeTracker* st = StOf(*item.ast->src(0));
    found |= st->shape() == Shape{3, 5, 3};  // 4 rows + 1, right 1 + left 2
  }
  EXPECT_TRUE(found) << "the seam view (3, 5, 3)";
  for (const Pads& p : {seam, slabs})
    ExpectCpuMatchesInterp([&](const std::string& dev) { return build(dev, p); });
}

// The first 50 of a one-row matmul's 64 columns are contiguous but not the
// whole result: the matmul is realized before the slice (fusing through
// it aborted on a reshape of 64 elements into 50).
TEST_F(CodegenTest, ReduceSlicedToAContiguousPrefixIsRealized) {
  Tensor y = A({1, 8}).Matmul(A({8, 64})).Shrink({{0, 1}, {0, 50}}) + A({1, 50});
  EXPECT_EQ(Sched({y}).items.size(), 2u);
  ExpectCpuMatchesInterp([&](const std::string& dev) {
    Tensor a = Tensor::Randn(e, {1, 8}, 1, dtypes::kFloat32, dev);
    Tensor b = Tensor::Randn(e, {8, 64}, 2, dtypes::kFloat32, dev);
    return a.Matmul(b).Shrink({{0, 1}, {0, 50}}) + 1.0;
  });
}

// The loop split across threads writes its own cache lines: the golden
// matmul's outermost axis is 4 column tiles of 16 (two threads would split
// every 64-wide row), so its row tiles are split, where their loop stands; a
// copy's outermost axis of whole 256-wide rows stays. On the thread pool
// they match the interpreter.
TEST_F(CodegenTest, ThreadsSplitALoopWhoseSlicesOwnTheirCacheLines) {
  auto check = [&](const Tensor& t, bool outermost) {
    auto k = Kernel::Create(Sched({t}).items.back().ast, RendererOptions{});
    ASSERT_TRUE(k.ok()) << k.status();
    k->HandCodedOptimizations();
    const int axis = k->ParallelAxis();
    int loop = 0;  // the parallel loop's number among the real loops
    for (int a = 0; a < axis; ++a) loop += k->full_shape()[a] > 1;
    EXPECT_EQ(loop == 0, outermost) << axis;
    auto p = Lower(*k);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->global[0], k->full_shape()[axis]);
    std::string src = RenderC("k", p->uops);
    EXPECT_NE(src.find(absl::StrCat("ridx", loop, " = (int)start")), std::string::npos)
        << src;
  };
  check(A({64, 32}).Matmul(A({32, 64})), false);
  check((A({64, 256}) + 1.0).Contiguous(), true);
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{64, 32, 64}, {56, 24, 144}}) {
    SCOPED_TRACE(absl::StrCat(m, "x", k, "x", n));
    ExpectCpuMatchesInterp([&](const std::string& dev) {
      Tensor a = Tensor::Randn(e, {m, k}, 1, dtypes::kFloat32, dev);
      Tensor b = Tensor::Randn(e, {k, n}, 2, dtypes::kFloat32, dev);
      return (a.Matmul(b) + 1.0).Relu();
    });
  }
}

TEST_F(CodegenTest, WideMatmulTilesMatchInterpreter) {
  // A vector operand reused along the rows: 6x2 tiles (12 accumulators).
  EXPECT_TRUE(Has(ReduceOpts(A({12, 40}).Matmul(A({40, 32}))), OptOp::kUpcast, 6));
  // 10 rows: 5x2; 200 columns round up to 208 (two vectors per tile row).
  std::vector<Opt> opts = ReduceOpts(A({10, 24}).Matmul(A({24, 200})));
  EXPECT_TRUE(Has(opts, OptOp::kUpcast, 5));
  EXPECT_TRUE(Has(opts, OptOp::kUpcast, 2));
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{12, 40, 32}, {10, 24, 200},
                         {18, 7, 100}, {30, 17, 6625 / 25}}) {
    SCOPED_TRACE(absl::StrCat(m, "x", k, "x", n));
    ExpectCpuMatchesInterp([&](const std::string& dev) {
      Tensor a = Tensor::Randn(e, {m, k}, 1, dtypes::kFloat32, dev);
      Tensor b = Tensor::Randn(e, {k, n}, 2, dtypes::kFloat32, dev);
      return (a.Matmul(b) + 1.0).Relu();
    });
  }
}

TEST_F(CodegenTest, SlidingWindowUnrollMatchesInterpreter) {
  // Depthwise convolutions: rows of a register tile share input rows, so
  // the window-row axis is unrolled (and its loads deduplicated). A 7 x 7
  // map tiles all 7 rows (no smaller amount divides them).
  struct Case {
    int64_t c, h, w, k, stride;
  };
  for (const Case& c : {Case{6, 12, 20, 5, 1}, Case{4, 8, 16, 3, 1}, Case{4, 12, 34, 3, 2},
                        Case{8, 7, 7, 5, 1}}) {
    SCOPED_TRACE(absl::StrCat(c.c, "ch ", c.h, "x", c.w, " k", c.k, " s", c.stride));
    auto build = [&](const std::string& dev) {
      Tensor x = Tensor::Randn(e, {2, c.c, c.h, c.w}, 3, dtypes::kFloat32, dev);
      Tensor w = Tensor::Randn(e, {c.c, 1, c.k, c.k}, 4, dtypes::kFloat32, dev);
      Tensor::ConvOptions o;
      o.stride = {c.stride, 1};
      o.padding = {{c.k / 2, c.k / 2}, {c.k / 2, c.k / 2}};
      o.groups = c.c;
      return x.Conv2d(w, nullptr, o);
    };
    if (c.stride == 1) {
      EXPECT_TRUE(Has(ReduceOpts(build("CPU")), OptOp::kUnroll, c.k));
    }
    if (c.h == 7) {
      EXPECT_TRUE(Has(ReduceOpts(build("CPU")), OptOp::kUpcast, 7));
    }
    ExpectCpuMatchesInterp(build);
  }
}

// A stride-2 window reads every other element: the elements between two
// read ones take their gates instead of none, so the masked loads of a row
// with a masked tail (73 columns: 9 vectors and one lane) are all-set (a
// plain load) in every vector but the last. Inception's 3x3 stride-2 max
// pool on 147-wide rows: 1495 -> 700-850 us. Negative inputs: a lane that
// read 0 would show.
TEST_F(CodegenTest, StrideTwoWindowGatesCoverTheSkippedElements) {
  auto pool = [&](const std::string& dev) {
    Tensor::PoolOptions o;
    o.kernel = {3, 3};
    o.stride = {2, 2};
    return (Tensor::Randn(e, {1, 4, 21, 21}, 5, dtypes::kFloat32, dev) - 4.0).MaxPool(o);
  };
  std::string src = Source(Sched({pool("CPU")}).items.back(), "pool");
  ASSERT_NE(src.find("(kbx8){1, "), std::string::npos) << src;
  EXPECT_EQ(src.find("(kbx8){1, 0"), std::string::npos) << src;
  ExpectCpuMatchesInterp(pool);
}

// A reduce with fewer than 4 vector accumulators (a max pool reuses no
// operand) upcasts its outermost output axis, the channels: independent
// chains of max ops. 6 channels take 3 (16 output rows: 3 divides only the
// channels).
TEST_F(CodegenTest, PoolTakesIndependentAccumulators) {
  auto pool = [&](const std::string& dev) {
    Tensor::PoolOptions o;
    o.kernel = {3, 3};
    o.stride = {2, 2};
    return Tensor::Randn(e, {1, 6, 33, 33}, 6, dtypes::kFloat32, dev).MaxPool(o);
  };
  EXPECT_TRUE(Has(ReduceOpts(pool("CPU")), OptOp::kUpcast, 3));
  ExpectCpuMatchesInterp(pool);
}

TEST_F(CodegenTest, WideVectorsMatchInterpreter) {
  // 512-bit register tiles (AVX-512 hosts; forced here, so that hosts
  // without AVX-512 run the same code through clang's 256-bit lowering):
  // matmuls with masked tails, a 3x3 convolution, a depthwise one.
  setenv("KILN_AVX512", "1", 1);
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{16, 40, 64}, {10, 24, 200},
                         {7, 33, 45}, {24, 8, 1000}}) {
    SCOPED_TRACE(absl::StrCat(m, "x", k, "x", n));
    ExpectCpuMatchesInterp([&](const std::string& dev) {
      Tensor a = Tensor::Randn(e, {m, k}, 5, dtypes::kFloat32, dev);
      Tensor b = Tensor::Randn(e, {k, n}, 6, dtypes::kFloat32, dev);
      return (a.Matmul(b) + 1.0).Relu();
    });
  }
  for (int64_t groups : {1, 8}) {
    SCOPED_TRACE(absl::StrCat("groups ", groups));
    ExpectCpuMatchesInterp([&](const std::string& dev) {
      Tensor x = Tensor::Randn(e, {2, 8, 10, 70}, 7, dtypes::kFloat32, dev);
      const int64_t cout = groups == 1 ? 12 : 8;
      Tensor w = Tensor::Randn(e, {cout, 8 / groups, 3, 3}, 8, dtypes::kFloat32, dev);
      Tensor::ConvOptions o;
      o.padding = {{1, 1}, {1, 1}};
      o.groups = groups;
      return x.Conv2d(w, nullptr, o);
    });
  }
  unsetenv("KILN_AVX512");
}

TEST_F(CodegenTest, ConcatConsumersLoopOverEachPart) {
  // An elementwise consumer of a 4-part concatenation along its outermost
  // axis lowers one loop per part (each clamped to the threads' slice), so
  // each loop reads only its part; two parts keep one loop.
  auto count = [](const std::string& src, const std::string& what) {
    size_t n = 0;
    for (size_t at = src.find(what); at != std::string::npos; at = src.find(what, at + 1)) ++n;
    return n;
  };
  auto kernel = [&](const std::vector<int64_t>& channels, int64_t batch, int64_t h = 5,
                    int64_t w = 6) {
    std::vector<Tensor> parts;
    for (int64_t c : channels) parts.push_back(A({batch, c, h, w}).Relu());
    Schedule s = Sched({(Tensor::Cat(parts, 1) * 2.0).Sigmoid()});
    EXPECT_EQ(s.items.size(), 1u);
    return s.items.empty() ? std::string() : Source(s.items.back(), "cat");
  };
  const std::string four = kernel({3, 5, 2, 4}, 1);
  EXPECT_EQ(count(four, "(int)(start > "), 4u) << four;
  // Each part's buffer is read in one loop only, by a plain load (the other
  // parts' gates fold to constants there).
  for (int b = 1; b <= 4; ++b) EXPECT_EQ(count(four, absl::StrCat("data", b, "[")), 1u) << four;
  EXPECT_EQ(count(four, "kiln_mload"), 0u) << four;
  // The selects between the parts fold as the values are built: no select
  // on a constant reaches the source.
  EXPECT_EQ(count(four, "(0?") + count(four, "(1?"), 0u) << four;
  EXPECT_EQ(count(kernel({3, 5}, 1), "(int)(start > "), 0u);
  // Batched, the parts run along the second axis, which the heuristics
  // move outermost (Kernel::PartsOutermost).
  EXPECT_EQ(count(kernel({3, 5, 2, 4}, 2), "(int)(start > "), 4u);
  // Also when the heuristics reshape the views after reading the cuts (a
  // 14 x 14 map merged to 196 and split into masked vectors): the gates are
  // read from the views as they end up (Kernel::ClearViewCaches).
  EXPECT_EQ(count(kernel({3, 5, 2, 4}, 8, 14, 14), "(int)(start > "), 4u);
  // Kernel::MaskedOutOn: in each part's segment exactly one part's load is
  // live; the lowerer builds no index for the others.
  {
    std::vector<Tensor> parts;
    for (int64_t c : {3, 5, 2, 4}) parts.push_back(A({1, c, 5, 6}).Relu());
    Schedule s = Sched({(Tensor::Cat(parts, 1) * 2.0).Sigmoid()});
    ASSERT_EQ(s.items.size(), 1u);
    auto k = Kernel::Create(s.items[0].ast, RendererOptions{});
    ASSERT_TRUE(k.ok()) << k.status();
    const int a0 = k->ParallelAxis();
    ASSERT_GE(a0, 0);
    std::vector<int64_t> cuts = k->PartCuts(a0);
    cuts.insert(cuts.begin(), 0);
    cuts.push_back(k->full_shape()[a0]);
    ASSERT_EQ(cuts.size(), 5u);
    for (size_t seg = 0; seg + 1 < cuts.size(); ++seg) {
      int live = 0;
      for (const UOp* u : Toposort(k->ast()))
        if (u->op() == Op::kLoad) live += !k->MaskedOutOn(u, a0, cuts[seg], cuts[seg + 1]);
      EXPECT_EQ(live, 1) << "segment " << seg;
    }
  }
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE(absl::StrCat("batch ", batch));
    ExpectCpuMatchesInterp([&](const std::string& dev) {
      std::vector<Tensor> parts;
      int seed = 11;
      for (int64_t c : {3, 5, 2, 4, 7, 1})
        parts.push_back(Tensor::Randn(e, {batch, c, 5, 6}, seed++, dtypes::kFloat32, dev));
      return (Tensor::Cat(parts, 1) * 2.0).Sigmoid();
    });
  }
}

TEST_F(CodegenTest, ShortStacksOfSlicesRunInOneLoop) {
  // A stack of up to 16 single slices (Winograd's transformed planes) whose
  // output fits a core's L2 computes every slice in one loop (the stacked
  // axis upcast whole, Kernel::UpcastUnitParts); a larger one keeps a loop
  // per slice.
  auto kernel = [&](int64_t parts, int64_t c, int64_t h, int64_t w) {
    Tensor x = A({4, c, h, w});
    std::vector<Tensor> planes;
    auto slice = [&](int64_t i) {
      return x.Shrink({{i % 4, i % 4 + 1}, {0, c}, {0, h}, {0, w}}).Reshape({c, h, w});
    };
    for (int64_t p = 0; p < parts; ++p)
      planes.push_back(slice(p) * static_cast<double>(p + 1) + slice(p + 1));
    Schedule s = Sched({Tensor::Stack(planes, 0)});
    EXPECT_EQ(s.items.size(), 1u);
    return s.items.empty() ? std::string() : Source(s.items.back(), "stack");
  };
  const std::string small = kernel(16, 8, 6, 8);  // 24 KiB
  EXPECT_EQ(small.find("(int)(start > "), std::string::npos) << small;
  const std::string large = kernel(16, 64, 28, 32);  // 3.7 MB
  size_t loops = 0;
  for (size_t at = large.find("(int)(start > "); at != std::string::npos;
       at = large.find("(int)(start > ", at + 1))
    ++loops;
  EXPECT_EQ(loops, 16u);
  for (int64_t parts : {3, 16}) {
    SCOPED_TRACE(absl::StrCat(parts, " parts"));
    ExpectCpuMatchesInterp([&](const std::string& dev) {
      Tensor x = Tensor::Randn(e, {4, 5, 6, 8}, 3, dtypes::kFloat32, dev);
      std::vector<Tensor> planes;
      for (int64_t p = 0; p < parts; ++p)
        planes.push_back(x.Shrink({{p % 4, p % 4 + 1}, {0, 5}, {0, 6}, {0, 8}}).Reshape({5, 6, 8}) -
                         x.Shrink({{(p + 2) % 4, (p + 2) % 4 + 1}, {0, 5}, {0, 6}, {0, 8}})
                             .Reshape({5, 6, 8}) *
                             static_cast<double>(p));
      return Tensor::Stack(planes, 0);
    });
  }
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--update_golden") kiln::update_golden = true;
  return RUN_ALL_TESTS();
}
