#include "engine/realize/beam.h"

#include <cstring>

#include "engine/codegen/lowerer.h"
#include "engine/realize/engine.h"
#include "engine/schedule/schedule.h"
#include "engine/tensor/test_util.h"
#include "engine/uop/buffer.h"

namespace kiln {
namespace {

// A matmul + bias + relu kernel scheduled on the CPU device, with its inputs.
struct Case {
  ScheduleItem item;
  std::vector<double> want;
};

Case MatmulCase(Engine* e, int64_t m, int64_t k, int64_t n) {
  std::vector<float> av(m * k), bv(k * n), cv(n);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>((i * 7) % 13) / 8 - 0.75f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>((i * 5) % 11) / 8 - 0.6f;
  for (size_t i = 0; i < cv.size(); ++i) cv[i] = static_cast<float>(i % 3) - 1;
  Tensor a = Tensor::FromFloats(e, av, {m, k}, "CPU"), b = Tensor::FromFloats(e, bv, {k, n}, "CPU");
  Tensor c = Tensor::FromFloats(e, cv, {n}, "CPU");
  Tensor r = (a.Matmul(b) + c).Relu();
  auto s = CreateSchedule({r.uop()}, "CPU");
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->items.size(), 1u);
  return {s->items[0], Values(r)};
}

// Runs the kernel built with `knobs` and returns its output.
std::vector<double> RunWith(Engine* e, const ScheduleItem& item, const HeuristicKnobs& knobs) {
  Device* cpu = *e->GetDevice("CPU");
  auto ropts = CodegenOptions("c", "CPU");
  EXPECT_TRUE(ropts.ok());
  auto k = Kernel::Create(item.ast, *ropts);
  EXPECT_TRUE(k.ok()) << k.status();
  k->HandCodedOptimizations(knobs);
  auto p = Lower(*k);
  EXPECT_TRUE(p.ok()) << p.status();
  auto src = RenderKernel("c", "beam_test", p->uops);
  EXPECT_TRUE(src.ok());
  auto bin = cpu->compiler().Compile(*src);
  EXPECT_TRUE(bin.ok()) << bin.status();
  auto prog = cpu->LoadProgram("beam_test", *bin);
  EXPECT_TRUE(prog.ok()) << prog.status();
  std::vector<BufferRef> keep;
  std::vector<void*> ptrs;
  const int64_t out_elems = BufferOf(*item.bufs[0]).size();
  for (size_t i = 0; i < item.bufs.size(); ++i) {
    BufferRef b = i == 0 ? *cpu->NewBuffer(out_elems * 4) : *e->StorageOf(item.bufs[i]);
    keep.push_back(b);
    ptrs.push_back(*b->Ptr());
  }
  LaunchDims dims;
  dims.global = p->global;
  EXPECT_TRUE((*prog)->Launch(ptrs, {}, dims, true, nullptr).ok());
  std::vector<float> out(out_elems);
  EXPECT_TRUE(keep[0]->CopyOut(out.data(), out.size() * 4).ok());
  return std::vector<double>(out.begin(), out.end());
}

// Every setting BEAM can pick must compute the same thing as the defaults.
TEST(BeamTest, EveryKnobSettingComputesTheSameMatmul) {
  Engine* e = TestEngine();
  Case c = MatmulCase(e, 24, 48, 40);
  std::vector<HeuristicKnobs> settings(1);
  for (int r : {2, 3, 5, 6, 8}) settings.push_back({r, -1, true, 4, true});
  for (int a : {0, 1, 2}) settings.push_back({0, a, true, 4, true});
  for (int u : {1, 2, 8}) settings.push_back({0, -1, true, u, true});
  settings.push_back({0, -1, false, 4, true});
  settings.push_back({6, 2, false, 2, false});
  for (const HeuristicKnobs& k : settings) {
    SCOPED_TRACE(k.ToString());
    ExpectNear(RunWith(e, c.item, k), c.want);
  }
}

TEST(BeamTest, SearchTimesVariantsAndCachesTheChoice) {
  Engine* e = TestEngine();
  Case c = MatmulCase(e, 64, 96, 80);
  Device* cpu = *e->GetDevice("CPU");
  auto ropts = CodegenOptions("c", "CPU");
  ASSERT_TRUE(ropts.ok());
  std::vector<int64_t> bytes;
  for (const UOpRef& b : c.item.bufs) bytes.push_back(BufferOf(*b).size() * 4);
  auto r = BeamSearch(c.item.ast, *ropts, cpu, bytes, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  if (!r->cached) {  // a fresh cache: the search ran
    EXPECT_GE(r->variants, 2);
    EXPECT_GT(r->default_seconds, 0);
    // Not best <= default: a later round re-times the pick, and on a busy
    // machine that can come out slower (timings are never asserted).
    EXPECT_GT(r->best_seconds, 0);
  }
  ExpectNear(RunWith(e, c.item, r->knobs), c.want);
  auto again = BeamSearch(c.item.ast, *ropts, cpu, bytes, 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(again->knobs.ToString(), r->knobs.ToString());
  EXPECT_EQ(HeuristicKnobs::Parse(r->knobs.ToString())->ToString(), r->knobs.ToString());
}

// EngineOptions::beam (kilnd --beam) turns the search on for one engine:
// each new reduce kernel is searched (or its cached choice used) at its
// first compile, and the result is still right; beam = 0 never searches.
TEST(BeamTest, EngineOptionSearchesAtFirstCompile) {
  for (int beam : {0, 1}) {
    std::unique_ptr<DeviceRegistry> reg = DeviceRegistry::WithDefaults();
    EngineOptions options;
    options.beam = beam;
    Engine e(reg.get(), options);
    const int64_t m = 24 + beam, k = 40, n = 16;  // a kernel new to each engine
    std::vector<float> av(m * k, 0.5f), bv(k * n, 0.25f);
    Tensor a = Tensor::FromFloats(&e, av, {m, k}, "CPU");
    Tensor b = Tensor::FromFloats(&e, bv, {k, n}, "CPU");
    absl::StatusOr<std::vector<float>> out = a.Matmul(b).ToVector<float>();
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), static_cast<size_t>(m * n));
    for (float v : *out) ASSERT_FLOAT_EQ(v, 40 * 0.125f);
    if (beam == 0) {
      EXPECT_EQ(e.stats().beam_searches, 0u);
    } else {
      EXPECT_GE(e.stats().beam_searches, 1u);
    }
  }
}

}  // namespace
}  // namespace kiln
