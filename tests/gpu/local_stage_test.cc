// Local-memory staging of matmul operands (engine/codegen/lowerer_local.h):
//   * the heuristics stage the kernels they should (matmuls of many shapes,
//     1x1 and im2col convolutions) and no others (CPU, elementwise, GROUP reductions),
//     and the staged source has the local buffers and both barriers;
//   * the staged CUDA C compiles with NVRTC (skipped without NVRTC);
//   * the staged kernels give the interpreter's results on every GPU device
//     here (OPENCL on PoCL in CI).
#include <set>

#include "absl/strings/str_join.h"
#include "engine/codegen/kernel.h"
#include "engine/codegen/lowerer.h"
#include "engine/realize/engine.h"
#include "engine/renderer/renderer.h"
#include "engine/runtime/cuda_device.h"
#include "engine/schedule/schedule.h"
#include "engine/tensor/test_util.h"
#include "tests/gpu/op_cases.h"

namespace kiln {
namespace {

using gpu_test::Input;

struct StageCase {
  std::string name;
  std::function<Tensor(Engine*, const std::string&)> build;
  bool staged;  // the heuristics stage its matmul kernel
  double tol = 1e-4;
};

Tensor Mm(Engine* e, const std::string& dev, int64_t m, int64_t k, int64_t n,
          DType dt = dtypes::kFloat32) {
  return Input(e, dev, {m, k}, dt, 1).Matmul(Input(e, dev, {k, n}, dt, 2));
}

std::vector<StageCase> Cases() {
  std::vector<StageCase> c;
  auto mm = [&](int64_t m, int64_t k, int64_t n, bool staged) {
    c.push_back({absl::StrCat("matmul_", m, "x", k, "x", n),
                 [=](Engine* e, const std::string& d) { return Mm(e, d, m, k, n); }, staged});
  };
  mm(64, 64, 64, true);      // square: 16x16 blocks, slices of 16 (4 loop x 4 unrolled)
  mm(128, 128, 128, true);
  mm(512, 32, 512, true);    // 4x4 register tiles, 16x16 blocks (64x64 per block)
  mm(1000, 64, 32, true);    // tall
  mm(16, 128, 1000, true);   // wide: 16x8 blocks
  mm(100, 37, 70, true);     // M, N padded to 112, 80 (guards); K 37 padded to 48 (3 slices)
  mm(33, 47, 29, true);      // nothing divides: M, N padded to 48, 32; K padded to 48
  mm(130, 100, 66, true);    // K = 100: unroll 4, loop 25 padded to 28
  mm(64, 20, 64, true);      // K = 20: slices of 4 (the unroll)
  mm(24, 40, 36, true);      // 128 threads copy a 64-element A tile (the rest gated off)
  mm(8, 512, 16, false);     // few outputs, long K: GROUP instead
  mm(64, 7, 64, false);      // K too short to slice
  for (DType dt : {dtypes::kFloat16, dtypes::kBFloat16, dtypes::kFloat64}) {
    c.push_back({absl::StrCat("matmul_", dt.Name()),
                 [=](Engine* e, const std::string& d) { return Mm(e, d, 96, 64, 80, dt); }, true,
                 2 * gpu_test::Tol(dt)});
  }
  c.push_back({"batched", [](Engine* e, const std::string& d) {
                 return Input(e, d, {4, 48, 40}, dtypes::kFloat32, 3)
                     .Matmul(Input(e, d, {4, 40, 56}, dtypes::kFloat32, 4));
               }, true});
  c.push_back({"batched_broadcast_b", [](Engine* e, const std::string& d) {
                 return Input(e, d, {3, 17, 20}, dtypes::kFloat32, 5)
                     .Matmul(Input(e, d, {20, 9}, dtypes::kFloat32, 6));
               }, true});
  c.push_back({"batched_two_axes", [](Engine* e, const std::string& d) {
                 return Input(e, d, {2, 3, 20, 24}, dtypes::kFloat32, 7)
                     .Matmul(Input(e, d, {2, 1, 24, 28}, dtypes::kFloat32, 8));
               }, true});
  c.push_back({"transposed_a", [](Engine* e, const std::string& d) {
                 return Input(e, d, {48, 80}, dtypes::kFloat32, 9).Transpose()
                     .Matmul(Input(e, d, {48, 72}, dtypes::kFloat32, 10));
               }, true});
  c.push_back({"transposed_b", [](Engine* e, const std::string& d) {
                 return Input(e, d, {80, 48}, dtypes::kFloat32, 11)
                     .Matmul(Input(e, d, {72, 48}, dtypes::kFloat32, 12).Transpose());
               }, true});
  c.push_back({"transposed_both", [](Engine* e, const std::string& d) {
                 return Input(e, d, {52, 66}, dtypes::kFloat32, 13).Transpose()
                     .Matmul(Input(e, d, {70, 52}, dtypes::kFloat32, 14).Transpose());
               }, true});
  c.push_back({"same_buffer", [](Engine* e, const std::string& d) {
                 Tensor a = Input(e, d, {60, 44}, dtypes::kFloat32, 15);
                 return a.Matmul(a.Transpose());
               }, true});
  // Masked views: the copy stores 0 outside them.
  c.push_back({"padded_a", [](Engine* e, const std::string& d) {
                 return Input(e, d, {45, 30}, dtypes::kFloat32, 16)
                     .Pad({{1, 2}, {3, 3}}, 0.0)
                     .Matmul(Input(e, d, {36, 50}, dtypes::kFloat32, 17));
               }, true});
  c.push_back({"sliced_operands", [](Engine* e, const std::string& d) {
                 return Input(e, d, {80, 90}, dtypes::kFloat32, 18).Shrink({{5, 69}, {10, 74}})
                     .Matmul(Input(e, d, {70, 70}, dtypes::kFloat32, 19)
                                 .Shrink({{3, 67}, {1, 41}}));
               }, true});
  c.push_back({"linear_bias_relu", [](Engine* e, const std::string& d) {
                 Tensor b = Input(e, d, {48}, dtypes::kFloat32, 20);
                 return Input(e, d, {37, 64}, dtypes::kFloat32, 21)
                     .Linear(Input(e, d, {48, 64}, dtypes::kFloat32, 22), &b).Relu();
               }, true});
  c.push_back({"conv_1x1", [](Engine* e, const std::string& d) {
                 Tensor x = Input(e, d, {2, 32, 14, 14}, dtypes::kFloat32, 23);
                 Tensor w = Input(e, d, {48, 32, 1, 1}, dtypes::kFloat32, 24);
                 return x.Conv(w, nullptr, {});
               }, true});
  c.push_back({"conv_3x3_bias", [](Engine* e, const std::string& d) {
                 Tensor x = Input(e, d, {2, 8, 12, 12}, dtypes::kFloat32, 25);
                 Tensor w = Input(e, d, {16, 8, 3, 3}, dtypes::kFloat32, 26);
                 Tensor b = Input(e, d, {16}, dtypes::kFloat32, 27);
                 Tensor::ConvOptions o;
                 o.padding = {{1, 1}, {1, 1}};
                 o.algo = Tensor::ConvAlgo::kDirect;  // windows read in place: no matmul
                 return x.Conv(w, &b, o);
               }, false});
  // The same convolution with its windows copied out (im2col, what a 12-wide
  // map gets by default): a matmul over Cin * 9, staged.
  c.push_back({"conv_3x3_im2col", [](Engine* e, const std::string& d) {
                 Tensor x = Input(e, d, {2, 8, 12, 12}, dtypes::kFloat32, 25);
                 Tensor w = Input(e, d, {16, 8, 3, 3}, dtypes::kFloat32, 26);
                 Tensor b = Input(e, d, {16}, dtypes::kFloat32, 27);
                 Tensor::ConvOptions o;
                 o.padding = {{1, 1}, {1, 1}};
                 o.algo = Tensor::ConvAlgo::kIm2Col;
                 return x.Conv(w, &b, o);
               }, true});
  return c;
}

struct Compiled {
  std::string name, source;
  LinearProgram prog;
  bool staged;
};

// Optimizes, lowers and renders every kernel of `c` like the engine does
// for `renderer` (without the WMMA path).
std::vector<Compiled> Compile(const StageCase& c, const std::string& renderer,
                              const std::string& device, RendererOptions* override = nullptr) {
  Engine* e = TestEngine();
  auto opts = CodegenOptions(renderer, device);
  EXPECT_TRUE(opts.ok()) << opts.status();
  if (override) *opts = *override;
  std::vector<Compiled> out;
  Tensor t = c.build(e, "INTERP");
  auto sched = CreateSchedule({t.uop()}, "INTERP");
  EXPECT_TRUE(sched.ok()) << c.name << ": " << sched.status();
  if (!sched.ok()) return out;
  for (const ScheduleItem& item : sched->items) {
    auto k = Kernel::Create(item.ast, *opts);
    EXPECT_TRUE(k.ok()) << c.name << ": " << k.status();
    if (!k.ok()) continue;
    k->HandCodedOptimizations();
    auto p = Lower(*k);
    EXPECT_TRUE(p.ok()) << c.name << ": " << p.status();
    if (!p.ok()) continue;
    std::string name = absl::StrCat(p->name, "_", out.size());
    auto src = RenderKernel(renderer, name, p->uops);
    EXPECT_TRUE(src.ok()) << src.status();
    out.push_back({name, src.ok() ? *src : "", *p, k->stage_axis() >= 0});
  }
  return out;
}

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(LocalStaging, MatmulSourceHasLocalTilesAndBarriers) {
  StageCase c{"m", [](Engine* e, const std::string& d) { return Mm(e, d, 512, 256, 512); }, true};
  std::vector<Compiled> cuda = Compile(c, "cuda", "CUDA");
  ASSERT_EQ(cuda.size(), 1u);
  const Compiled& k = cuda[0];
  ASSERT_TRUE(k.staged);
  // 16x16 threads with 4x4 tiles: a 64x16 slice of A and a 16x64 one of B.
  EXPECT_NE(std::find(k.prog.opts.begin(), k.prog.opts.end(), "STAGE(4,1024+1024)"),
            k.prog.opts.end())
      << absl::StrJoin(k.prog.opts, " ");
  EXPECT_EQ(k.prog.local[0], 16);
  EXPECT_EQ(k.prog.local[1], 16);
  EXPECT_NE(k.source.find("__shared__ float temp0[1024];"), std::string::npos) << k.source;
  EXPECT_NE(k.source.find("__shared__ float temp1[1024];"), std::string::npos) << k.source;
  EXPECT_EQ(Count(k.source, "__syncthreads();"), 2) << k.source;  // after the copy, after the use
  EXPECT_GE(Count(k.source, "= temp0["), 16) << k.source;  // the products read local memory
  EXPECT_GE(Count(k.source, "= temp1["), 16) << k.source;
  // Each thread copies 4 + 4 elements per slice: the only global loads.
  EXPECT_EQ(Count(k.source, "= data1["), 4) << k.source;
  EXPECT_EQ(Count(k.source, "= data2["), 4) << k.source;
  // Estimates: the same FLOPs; bytes count global memory only.
  LinearProgram p = k.prog;
  EstimateCosts(&p, {512 * 512 * 4, 512 * 256 * 4, 256 * 512 * 4});
  EXPECT_DOUBLE_EQ(p.flops, 2.0 * 512 * 512 * 256);
  EXPECT_DOUBLE_EQ(p.bytes, 4.0 * (512 * 512 + 2 * 512 * 256));

  std::vector<Compiled> cl = Compile(c, "opencl", "OPENCL");
  ASSERT_EQ(cl.size(), 1u);
  EXPECT_NE(cl[0].source.find("__local float temp0[1024];"), std::string::npos) << cl[0].source;
  EXPECT_NE(cl[0].source.find("__local float temp1[1024];"), std::string::npos) << cl[0].source;
  EXPECT_EQ(Count(cl[0].source, "barrier(CLK_LOCAL_MEM_FENCE);"), 2) << cl[0].source;
}

TEST(LocalStaging, HalfOperandsAreStagedAsFloat) {
  auto build = [](Engine* e, const std::string& d) {
    return Mm(e, d, 96, 64, 80, dtypes::kFloat16);
  };
  StageCase c{"h", build, true};
  std::vector<Compiled> cl = Compile(c, "opencl", "OPENCL");  // casts, then the matmul
  ASSERT_FALSE(cl.empty());
  ASSERT_TRUE(cl.back().staged);
  EXPECT_NE(cl.back().source.find("__local float temp0["), std::string::npos) << cl.back().source;
}

TEST(LocalStaging, OnlyGpuMatmulsAreStaged) {
  StageCase c{"m", [](Engine* e, const std::string& d) { return Mm(e, d, 512, 256, 512); }, true};
  RendererOptions off = *CodegenOptions("opencl", "OPENCL");
  off.local_staging = false;
  RendererOptions cpu = *CodegenOptions("c", "CPU");
  for (RendererOptions* o : {&off, &cpu}) {
    for (const Compiled& k : Compile(c, o->gpu ? "opencl" : "c", o->device, o)) {
      EXPECT_FALSE(k.staged);
      for (const UOpRef& u : k.prog.uops) EXPECT_NE(u->op(), Op::kDefineLocal) << k.source;
    }
  }
  // Elementwise kernels and GROUP reductions are not matmuls.
  StageCase ew{"ew", [](Engine* e, const std::string& d) {
                 return Input(e, d, {300, 40}, dtypes::kFloat32, 1) * 2.0;
               }, false};
  StageCase sum{"sum", [](Engine* e, const std::string& d) {
                  return Input(e, d, {3, 4096}, dtypes::kFloat32, 1).Sum({1});
                }, false};
  StageCase matvec{"matvec", [](Engine* e, const std::string& d) {
                     return Input(e, d, {300, 64}, dtypes::kFloat32, 1)
                         .Matmul(Input(e, d, {64}, dtypes::kFloat32, 2));
                   }, false};
  for (const StageCase* s : {&ew, &sum, &matvec})
    for (const Compiled& k : Compile(*s, "opencl", "OPENCL")) EXPECT_FALSE(k.staged) << s->name;
}

TEST(LocalStaging, HeuristicsStageTheMatmulCases) {
  int staged = 0;
  for (const StageCase& c : Cases()) {
    bool any = false;
    std::string opts;
    for (const Compiled& k : Compile(c, "opencl", "OPENCL")) {
      any |= k.staged;
      absl::StrAppend(&opts, k.name, ": ", absl::StrJoin(k.prog.opts, " "), "; ");
      if (k.staged) {
        EXPECT_EQ(Count(k.source, "barrier(CLK_LOCAL_MEM_FENCE);"), 2)
            << c.name << "\n" << k.source;
      }
    }
    EXPECT_EQ(any, c.staged) << c.name << ": " << opts;
    std::printf("%s: %s\n", c.name.c_str(), opts.c_str());
    staged += any;
  }
  EXPECT_EQ(staged, 25);
}

TEST(LocalStaging, CudaKernelsCompileWithNvrtc) {
  CudaCompiler::Options o;
  o.arch = "compute_90";
  auto compiler = CudaCompiler::Create(o);
  if (!compiler.ok()) GTEST_SKIP() << "NVRTC not available: " << compiler.status();
  int staged = 0;
  for (const StageCase& c : Cases()) {
    for (const Compiled& k : Compile(c, "cuda", "CUDA")) {
      auto ptx = (*compiler)->Compile(k.source);
      ASSERT_TRUE(ptx.ok()) << c.name << ": " << ptx.status() << "\n" << k.source;
      EXPECT_NE(ptx->find(".entry " + k.name), std::string::npos) << k.source;
      if (!k.staged) continue;
      ++staged;
      EXPECT_NE(ptx->find(".shared"), std::string::npos) << c.name;
      EXPECT_NE(ptx->find("bar.sync"), std::string::npos) << c.name;
    }
  }
  EXPECT_EQ(staged, 25);
}

class LocalStagingRun : public ::testing::TestWithParam<std::string> {};

TEST_P(LocalStagingRun, MatchesInterpreter) {
  Engine* e = TestEngine();
  for (const StageCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    Tensor want = c.build(e, "INTERP");
    Tensor got = c.build(e, GetParam());
    ASSERT_EQ(got.shape(), want.shape());
    ExpectNear(Values(got), Values(want), c.tol, c.tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, LocalStagingRun, ::testing::ValuesIn(GpuTestDevices()),
                         DeviceParamName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LocalStagingRun);

}  // namespace
}  // namespace kiln
