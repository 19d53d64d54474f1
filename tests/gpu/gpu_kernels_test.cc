// Renders the kernels of every op case (tests/gpu/op_cases.h) for the GPU
// backends and compiles the CUDA C with NVRTC to PTX for compute_90 (no GPU
// or driver needed; skipped with the reason when NVRTC is missing). The
// OpenCL C kernels are built and run by gpu_ops_test.
// Also checks the GPU codegen shape: grid / block indices, no loops over
// global axes, bounds guards, and that CPU kernels are unaffected.
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

struct Rendered {
  std::string name, source;
  LinearProgram prog;
};

// Lowers and renders every kernel of every op case for `renderer`.
std::vector<Rendered> RenderAll(const std::string& renderer, const std::string& device) {
  Engine* e = TestEngine();
  auto opts = CodegenOptions(renderer, device);
  EXPECT_TRUE(opts.ok()) << opts.status();
  std::vector<Rendered> out;
  std::set<const UOp*> seen;
  UOpList keep;
  for (const gpu_test::OpCase& c : gpu_test::OpCases()) {
    Tensor t = c.build(e, "INTERP");
    EXPECT_TRUE(t.ok()) << c.name << ": " << t.status();
    auto sched = CreateSchedule({t.uop()}, "INTERP");
    EXPECT_TRUE(sched.ok()) << c.name << ": " << sched.status();
    if (!sched.ok()) continue;
    for (size_t i = 0; i < sched->items.size(); ++i) {
      const UOpRef& ast = sched->items[i].ast;
      if (!seen.insert(ast.get()).second) continue;
      keep.push_back(ast);
      auto k = Kernel::Create(ast, *opts);
      EXPECT_TRUE(k.ok()) << c.name << ": " << k.status();
      if (!k.ok()) continue;
      k->HandCodedOptimizations();
      auto p = Lower(*k);
      EXPECT_TRUE(p.ok()) << c.name << ": " << p.status();
      if (!p.ok()) continue;
      std::string name = absl::StrCat(p->name, "_", out.size());
      auto src = RenderKernel(renderer, name, p->uops);
      EXPECT_TRUE(src.ok()) << src.status();
      out.push_back({name, src.ok() ? *src : "", *p});
    }
  }
  return out;
}

TEST(GpuKernels, CudaKernelsCompileWithNvrtc) {
  CudaCompiler::Options o;
  o.arch = "compute_90";
  auto compiler = CudaCompiler::Create(o);
  if (!compiler.ok()) GTEST_SKIP() << "NVRTC not available: " << compiler.status();
  std::vector<Rendered> kernels = RenderAll("cuda", "CUDA");
  ASSERT_GT(kernels.size(), 60u);
  for (const Rendered& k : kernels) {
    auto ptx = (*compiler)->Compile(k.source);
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    EXPECT_NE(ptx->find(".entry " + k.name), std::string::npos) << k.source;
  }
  std::printf("compiled %zu CUDA kernels with %s\n", kernels.size(),
              (*compiler)->version().c_str());
}

TEST(GpuKernels, GridAndBlockShape) {
  for (const Rendered& k : RenderAll("cuda", "CUDA")) {
    int64_t threads = k.prog.local[0] * k.prog.local[1] * k.prog.local[2];
    EXPECT_LE(threads, 1024) << k.name;
    EXPECT_LE(k.prog.global[1], 65535) << k.name;
    EXPECT_LE(k.prog.global[2], 65535) << k.name;
    for (const UOpRef& u : k.prog.uops) {
      if (u->op() != Op::kRange) continue;
      // Loops only over reduce axes: never marked parallel on a GPU.
      EXPECT_FALSE(u->arg().Ints().size() > 1 && u->arg().Ints()[1]) << k.source;
    }
    EXPECT_EQ(k.source.find("__attribute__((ext_vector_type"), std::string::npos);
  }
}

TEST(GpuKernels, ElementwiseGetsGuardedBlocks) {
  // 3 x 333 floats (merged to 999): blocks of 256, padded to 1024 with
  // stores gated by the bounds guard.
  Engine* e = TestEngine();
  Tensor t = gpu_test::Input(e, "INTERP", {3, 333}, dtypes::kFloat32, 1) + 1.0;
  auto sched = CreateSchedule({t.uop()}, "INTERP");
  ASSERT_TRUE(sched.ok());
  auto k = Kernel::Create(sched->items.back().ast, *CodegenOptions("cuda", "CUDA"));
  ASSERT_TRUE(k.ok());
  k->HandCodedOptimizations();
  auto p = Lower(*k);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->local[0], 256);
  EXPECT_EQ(p->global[0], 4);
  EXPECT_EQ(p->global[1], 1);
  std::string src = RenderCuda("guarded", p->uops);
  EXPECT_NE(src.find("blockIdx.x"), std::string::npos) << src;
  EXPECT_NE(src.find("threadIdx.x"), std::string::npos) << src;
  EXPECT_NE(src.find("if ("), std::string::npos) << src;  // the guard
  EXPECT_EQ(src.find("for ("), std::string::npos) << src;
  // Estimates count the threads of the grid.
  EstimateCosts(&*p, {3 * 333 * 4, 3 * 333 * 4});
  EXPECT_GE(p->flops, 3 * 333);
}

TEST(GpuKernels, MatmulGetsRegisterTilesAnd2DBlocks) {
  Engine* e = TestEngine();
  Tensor t = gpu_test::Input(e, "INTERP", {512, 256}, dtypes::kFloat32, 1)
                 .Matmul(gpu_test::Input(e, "INTERP", {256, 512}, dtypes::kFloat32, 2));
  auto sched = CreateSchedule({t.uop()}, "INTERP");
  ASSERT_TRUE(sched.ok());
  auto k = Kernel::Create(sched->items.back().ast, *CodegenOptions("cuda", "CUDA"));
  ASSERT_TRUE(k.ok());
  k->HandCodedOptimizations();
  std::vector<std::string> applied;
  for (const Opt& o : k->applied()) applied.push_back(o.ToString());
  EXPECT_EQ(k->local_dims(), 2) << absl::StrJoin(applied, " ");
  auto p = Lower(*k);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->local[0], 16);
  EXPECT_EQ(p->local[1], 16);
  EXPECT_EQ(p->global[0] * p->local[0] * 4, 512);
  EstimateCosts(&*p, {512 * 512 * 4, 512 * 256 * 4, 256 * 512 * 4});
  EXPECT_DOUBLE_EQ(p->flops, 2.0 * 512 * 512 * 256);
}

TEST(GpuKernels, LongReductionWithFewOutputsIsGrouped) {
  Engine* e = TestEngine();
  Tensor t = gpu_test::Input(e, "INTERP", {3, 4096}, dtypes::kFloat32, 1).Sum({1});
  auto sched = CreateSchedule({t.uop()}, "INTERP");
  ASSERT_TRUE(sched.ok());
  auto k = Kernel::Create(sched->items.back().ast, *CodegenOptions("cuda", "CUDA"));
  ASSERT_TRUE(k.ok());
  k->HandCodedOptimizations();
  EXPECT_EQ(k->group_dims(), 1);
  auto p = Lower(*k);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->local[0], 256);  // the group threads
  std::string cuda = RenderCuda("grouped", p->uops);
  EXPECT_NE(cuda.find("__shared__ float temp0[256];"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("__syncthreads();"), std::string::npos) << cuda;
  std::string cl = RenderOpenCL("grouped", p->uops);
  EXPECT_NE(cl.find("__local float temp0[256];"), std::string::npos) << cl;
  EXPECT_NE(cl.find("barrier(CLK_LOCAL_MEM_FENCE);"), std::string::npos) << cl;
  // Estimates count global memory only, over all threads.
  EstimateCosts(&*p, {3 * 4, 3 * 4096 * 4});
  EXPECT_DOUBLE_EQ(p->bytes, 3 * 4 + 3 * 4096 * 4);
  EXPECT_GE(p->flops, 3 * 4096);
}

TEST(GpuKernels, LocalIsRefusedOnCpu) {
  Engine* e = TestEngine();
  Tensor t = gpu_test::Input(e, "INTERP", {64}, dtypes::kFloat32, 1) + 1.0;
  auto sched = CreateSchedule({t.uop()}, "INTERP");
  ASSERT_TRUE(sched.ok());
  auto k = Kernel::Create(sched->items.back().ast, RendererOptions{});
  ASSERT_TRUE(k.ok());
  EXPECT_FALSE(k->ApplyOpt({OptOp::kLocal, 0, 16}).ok());
}

}  // namespace
}  // namespace kiln
