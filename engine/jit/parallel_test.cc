// ParallelPlan: which captured kernels may run side by side, from the
// buffers they touch; and the Jit's replays running independent chains on
// the threads of a CPU pool, with the results of a plain run.
#include "engine/jit/parallel.h"

#include <memory>
#include <random>

#include "engine/base/status.h"
#include "engine/jit/capture.h"
#include "engine/jit/jit.h"
#include "engine/runtime/thread_pool.h"
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

using jit_internal::Node;
using jit_internal::ParallelPlan;

// Items of a node by hand: `uses[k]` lists item k's buffers, the first
// written, the rest read. Every kernel costs the same.
Node MakeNode(const std::vector<BufferRef>& pool, const std::vector<std::vector<int>>& uses) {
  auto kernel = std::make_shared<CompiledKernel>();
  kernel->flops = 1e6;
  Node n;
  for (const std::vector<int>& u : uses) {
    ExecItem e;
    e.kernel = kernel;
    for (int b : u) e.bufs.push_back(pool[b]);
    n.items.push_back(e);
  }
  return n;
}

TEST(ParallelPlanTest, DependenciesFromBuffers) {
  std::vector<BufferRef> b;
  for (int i = 0; i < 8; ++i) b.push_back(std::make_shared<Buffer>(nullptr, 64));
  // Two chains (0 -> 2 -> 4, 1 -> 3 -> 5) reading one weight (7).
  Node two = MakeNode(b, {{0, 7}, {1, 7}, {2, 0}, {3, 1}, {4, 2}, {5, 3}});
  ParallelPlan p2(two, 2);
  EXPECT_TRUE(p2.parallel());
  EXPECT_DOUBLE_EQ(p2.critical_share(), 0.5);
  EXPECT_FALSE(ParallelPlan(two, 1).parallel());  // one worker: in order
  // A chain: each kernel reads the one before.
  Node chain = MakeNode(b, {{0, 7}, {1, 0}, {2, 1}, {3, 2}});
  EXPECT_FALSE(ParallelPlan(chain, 2).parallel());
  EXPECT_DOUBLE_EQ(ParallelPlan(chain, 2).critical_share(), 1.0);
  // A kernel that rewrites what an earlier one read (write after read) or
  // wrote (write after write) comes after it.
  EXPECT_DOUBLE_EQ(ParallelPlan(MakeNode(b, {{0, 7}, {1, 6}}), 2).critical_share(), 0.5);
  EXPECT_DOUBLE_EQ(ParallelPlan(MakeNode(b, {{0, 7}, {7, 6}}), 2).critical_share(), 1.0);
  EXPECT_DOUBLE_EQ(ParallelPlan(MakeNode(b, {{0, 7}, {0, 6}}), 2).critical_share(), 1.0);
  // Unequal chains (3 kernels and 1): the longest is 3/4 of the work.
  Node uneven = MakeNode(b, {{0, 7}, {1, 0}, {2, 1}, {3, 6}});
  EXPECT_DOUBLE_EQ(ParallelPlan(uneven, 2).critical_share(), 0.75);
  EXPECT_FALSE(ParallelPlan(uneven, 2).parallel());
  // The caller's input and the replay's outputs hold no buffer in their
  // slots; each counts as one. Two kernels writing output 0 are ordered.
  Node slots = MakeNode(b, {{0, 7}, {1, 7}, {2, 0}, {3, 1}});
  slots.items[0].bufs[1].reset();
  slots.items[1].bufs[1].reset();
  slots.items[2].bufs[0].reset();
  slots.items[3].bufs[0].reset();
  slots.inputs = {{{0, 1}, {1, 1}}};
  slots.outputs.resize(1);
  slots.outputs[0].slots = {{2, 0}, {3, 0}};
  EXPECT_DOUBLE_EQ(ParallelPlan(slots, 2).critical_share(), 0.75);
  slots.outputs.resize(2);
  slots.outputs[0].slots = {{2, 0}};
  slots.outputs[1].slots = {{3, 0}};
  EXPECT_DOUBLE_EQ(ParallelPlan(slots, 2).critical_share(), 0.5);
}

Tensor Random(Engine* e, Shape s, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2, 2);
  std::vector<float> v(Prod(s));
  for (float& x : v) x = d(rng);
  return Tensor::FromFloats(e, v, s, "CPU");
}

// Two chains of kernels over the halves of x, each realized on its own
// (its own buffers), as a batch built in two groups of slices.
absl::StatusOr<std::vector<Tensor>> TwoChains(const std::vector<Tensor>& in) {
  const int64_t half = in[0].shape()[0] / 2, w = in[0].shape()[1];
  std::vector<Tensor> parts;
  for (int64_t g = 0; g < 2; ++g) {
    Tensor x = in[0].Shrink({{g * half, (g + 1) * half}, {0, w}});
    Tensor h = (x.Matmul(in[1]) + 1.0).Relu().Contiguous();
    h = (h * h).Sum({1}, true).Contiguous() + h;
    Tensor y = h.Softmax(-1);
    RETURN_IF_ERROR(y.Realize());
    parts.push_back(y);
  }
  return std::vector<Tensor>{Tensor::Cat(parts, 0)};
}

// One chain: the same kernels over the whole x.
absl::StatusOr<std::vector<Tensor>> OneChain(const std::vector<Tensor>& in) {
  Tensor h = (in[0].Matmul(in[1]) + 1.0).Relu().Contiguous();
  h = (h * h).Sum({1}, true).Contiguous() + h;
  return std::vector<Tensor>{h.Softmax(-1)};
}

// Replays on a pool of `threads` (the test thread's ThreadPool::Scope)
// give the plain run's values; returns the Jit's stats.
Jit::Stats ReplayOnThreads(const Jit::Fn& fn, int threads) {
  Engine* e = TestEngine();
  ThreadPool pool(threads);
  ThreadPool::Scope scope(&pool);
  Jit jit(fn);
  Tensor w = Random(e, {256, 256}, 1);
  for (int call = 0; call < 8; ++call) {
    Tensor x = Random(e, {128, 256}, 100 + call);
    auto got = jit({x, w});
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) break;
    auto want = fn({x, w});
    EXPECT_TRUE(want.ok());
    ExpectNear(Values((*got)[0]), Values((*want)[0]), 1e-5);
  }
  return jit.stats();
}

TEST(ParallelReplayTest, IndependentChainsRunSideBySide) {
  Jit::Stats two = ReplayOnThreads(TwoChains, 2);
  EXPECT_EQ(two.replays, 6u);
  EXPECT_EQ(two.parallel_replays, 6u);
  Jit::Stats three = ReplayOnThreads(TwoChains, 3);  // more workers than chains
  EXPECT_EQ(three.parallel_replays, 0u);  // the longest chain is half: over 1.1 / 3
  Jit::Stats one = ReplayOnThreads(TwoChains, 1);
  EXPECT_EQ(one.replays, 6u);
  EXPECT_EQ(one.parallel_replays, 0u);
  Jit::Stats chain = ReplayOnThreads(OneChain, 2);
  EXPECT_EQ(chain.replays, 6u);
  EXPECT_EQ(chain.parallel_replays, 0u);
}

}  // namespace
}  // namespace kiln
