// The tensor-core (WMMA) matmul path of the CUDA device:
//  * MatchMatmul on the kernels of real tensor graphs: which matmuls go to
//    tensor cores (with what layouts and parameters) and which do not;
//  * the rendered kernels compile with NVRTC to PTX and to cubins for sm_75
//    (where supported) / sm_80 / sm_90 (no GPU needed; skipped without NVRTC);
//  * Engine::GetKernels picks the WMMA kernel on a CUDA device (here one
//    that only compiles, with NVRTC), and only where it should;
//  * with a CUDA driver, fp16 / bf16 matmuls on CUDA match the interpreter
//    (skipped without one).
// The kernels' index math is checked on the host in wmma_emulation_test.cc.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/renderer/cuda_wmma.h"
#include "engine/runtime/cuda_device.h"
#include "tests/gpu/op_cases.h"
#include "tests/gpu/wmma_test_util.h"

namespace kiln::wmma_test {
namespace {

const DType kF16 = dtypes::kFloat16, kBF16 = dtypes::kBFloat16, kF32 = dtypes::kFloat32;

class MatchMatmulTest : public ::testing::Test {
 protected:
  Tensor E(Shape s, DType d = dtypes::kFloat16) { return Tensor::Empty(e, s, d); }
  Engine* e = TestEngine();
};

TEST_F(MatchMatmulTest, Fp16RowMajor) {
  Tensor a = E({64, 32}), b = E({32, 48});
  ScheduleItem item;
  auto s = MatchOf(a.Matmul(b), &item);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->m, 64);
  EXPECT_EQ(s->n, 48);
  EXPECT_EQ(s->k, 32);
  EXPECT_TRUE(s->batch.empty());
  EXPECT_EQ(s->layout_a, MatLayout::kRowMajor);
  EXPECT_EQ(s->lda, 32);
  EXPECT_EQ(s->layout_b, MatLayout::kRowMajor);
  EXPECT_EQ(s->ldb, 48);
  EXPECT_EQ(s->ldc, 48);
  EXPECT_EQ(s->in_dtype, kF16);
  EXPECT_EQ(s->out_dtype, kF16);  // Matmul casts its float32 sum back
  // The parameters are the schedule's buffers, in the order the engine binds them.
  ASSERT_EQ(s->num_bufs, static_cast<int>(item.bufs.size()));
  EXPECT_EQ(BaseBuffer(item.bufs[s->param_a].get()), BaseBuffer(a.uop().get()));
  EXPECT_EQ(BaseBuffer(item.bufs[s->param_b].get()), BaseBuffer(b.uop().get()));
  EXPECT_EQ(s->param_c, 0);
}

TEST_F(MatchMatmulTest, TransposedOperandsAreColumnMajor) {
  Tensor at = E({32, 64}), bt = E({48, 32});
  auto s = MatchOf(at.Transpose().Matmul(bt.Transpose()));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->m, 64);
  EXPECT_EQ(s->n, 48);
  EXPECT_EQ(s->k, 32);
  EXPECT_EQ(s->layout_a, MatLayout::kColMajor);
  EXPECT_EQ(s->lda, 64);
  EXPECT_EQ(s->layout_b, MatLayout::kColMajor);
  EXPECT_EQ(s->ldb, 32);
}

TEST_F(MatchMatmulTest, BatchedAndBroadcast) {
  auto s = MatchOf(E({3, 64, 32}).Matmul(E({3, 32, 48})));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->m, 64);
  EXPECT_EQ(s->n, 48);
  ASSERT_EQ(s->batch.size(), 1u);
  EXPECT_EQ(s->batch[0].size, 3);
  EXPECT_EQ(s->batch[0].stride_a, 64 * 32);
  EXPECT_EQ(s->batch[0].stride_b, 32 * 48);
  EXPECT_EQ(s->batch[0].stride_c, 64 * 48);
  // A shared B: the batch folds into M (Kernel::Create merges the axes).
  auto merged = MatchOf(E({3, 64, 32}).Matmul(E({32, 48})));
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(merged->m, 3 * 64);
  EXPECT_TRUE(merged->batch.empty());
  // A shared A: a batch axis along which A does not move.
  auto shared_a = MatchOf(E({64, 32}).Matmul(E({2, 32, 48})));
  ASSERT_TRUE(shared_a.has_value());
  ASSERT_EQ(shared_a->batch.size(), 1u);
  EXPECT_EQ(shared_a->batch[0].stride_a, 0);
  EXPECT_EQ(shared_a->m, 64);
}

TEST_F(MatchMatmulTest, Bf16AndFloat32Output) {
  auto bf = MatchOf(E({32, 64}, kBF16).Matmul(E({64, 16}, kBF16)));
  ASSERT_TRUE(bf.has_value());
  EXPECT_EQ(bf->in_dtype, kBF16);
  EXPECT_EQ(bf->out_dtype, kBF16);
  // The float32 sum kept: a float32 result.
  auto f32 = MatchOf(Float32Matmul(E({64, 32}), E({32, 48})));
  ASSERT_TRUE(f32.has_value());
  EXPECT_EQ(f32->in_dtype, kF16);
  EXPECT_EQ(f32->out_dtype, kF32);
}

TEST_F(MatchMatmulTest, RejectsWhatTensorCoresDoNotDo) {
  Tensor a = E({64, 32}), b = E({32, 48});
  EXPECT_FALSE(MatchOf(E({64, 32}, kF32).Matmul(E({32, 48}, kF32))).has_value());
  EXPECT_FALSE(MatchOf(a.Matmul(b) + E({48})).has_value());  // bias epilogue
  EXPECT_FALSE(MatchOf(a.Matmul(b).Relu()).has_value());
  EXPECT_FALSE(MatchOf(E({64, 20}).Matmul(E({20, 48}))).has_value());  // K = 20
  EXPECT_FALSE(MatchOf(E({40, 32}).Matmul(E({32, 48}))).has_value());  // M = 40
  EXPECT_FALSE(MatchOf(a.Matmul(E({32, 48}, kBF16))).has_value());     // mixed inputs
  // A window of a wider matrix: leading dimension 36 is no multiple of 8.
  EXPECT_FALSE(MatchOf(E({64, 36}).Shrink({{0, 64}, {0, 32}}).Matmul(b)).has_value());
  // Padding masks the view.
  EXPECT_FALSE(MatchOf(E({64, 16}).Pad({{0, 0}, {0, 16}}).Matmul(b)).has_value());
  // Not a matmul at all.
  EXPECT_FALSE(MatchOf(a.Sum({1})).has_value());
  EXPECT_FALSE(MatchOf(a + a).has_value());
}

TEST(WmmaRender, GeometryAndEstimates) {
  MatmulSpec s = DenseSpec(64, 48, 32, MatLayout::kRowMajor, MatLayout::kRowMajor, kF16, kF32);
  s.batch = {{3, 64 * 32, 0, 64 * 48}};  // B shared by the batch
  WmmaKernel w = RenderWmma("wmma_k", s);
  // Warp tiles 32x16 (48 is no multiple of 32): 2 x 3 tiles in blocks of 2x2 warps.
  EXPECT_EQ(w.local[0], 128);
  EXPECT_EQ(w.global[0], 2);
  EXPECT_EQ(w.global[1], 1);
  EXPECT_EQ(w.global[2], 3);
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 64 * 48 * 32 * 3);
  EXPECT_DOUBLE_EQ(w.bytes, (64 * 32 * 3 + 32 * 48) * 2.0 + 64 * 48 * 3 * 4.0);
  EXPECT_NE(w.source.find("extern \"C\" __global__ void __launch_bounds__(128) wmma_k("),
            std::string::npos)
      << w.source;
  EXPECT_NE(w.source.find("if (tm >= 2 || tn >= 3) return;"), std::string::npos) << w.source;
  // No lane-dependent code: threadIdx only ever picks the warp.
  EXPECT_EQ(w.source.find("threadIdx.x %"), std::string::npos) << w.source;
  EXPECT_EQ(w.source.find("threadIdx.x &"), std::string::npos) << w.source;
}

TEST(WmmaRender, SupportedArchitectures) {
  MatmulSpec f16 = DenseSpec(32, 32, 32, MatLayout::kRowMajor, MatLayout::kRowMajor, kF16, kF32);
  EXPECT_FALSE(WmmaSupported(f16, 61));
  EXPECT_TRUE(WmmaSupported(f16, 70));
  MatmulSpec half_out = f16;
  half_out.out_dtype = kF16;
  std::string why;
  EXPECT_FALSE(WmmaSupported(half_out, 75, &why));
  EXPECT_NE(why.find("sm_80"), std::string::npos) << why;
  EXPECT_TRUE(WmmaSupported(half_out, 80));
  MatmulSpec bf = f16;
  bf.in_dtype = kBF16;
  EXPECT_FALSE(WmmaSupported(bf, 75));
  EXPECT_TRUE(WmmaSupported(bf, 90));
  MatmulSpec huge = f16;
  huge.batch = {{70000, 1024, 1024, 1024}};
  EXPECT_FALSE(WmmaSupported(huge, 90));
}

TEST(WmmaOptions, OnlyCudaGpusWithTensorCores) {
  EXPECT_TRUE(CudaOptions(90).tensor_cores);
  EXPECT_EQ(CudaOptions(90).sm, 90);
  EXPECT_TRUE(CudaOptions(70).tensor_cores);
  EXPECT_FALSE(CudaOptions(61).tensor_cores);
  EXPECT_FALSE(CudaOptions(0).tensor_cores);
  for (const char* r : {"c", "bytecode", "opencl"})
    EXPECT_FALSE(CodegenOptions(r, "X", 90)->tensor_cores) << r;
  setenv("KILN_WMMA", "0", 1);
  EXPECT_FALSE(CudaOptions(90).tensor_cores);
  unsetenv("KILN_WMMA");
}

absl::StatusOr<std::unique_ptr<CudaCompiler>> Nvrtc(const std::string& arch) {
  CudaCompiler::Options o;
  o.arch = arch;
  const char* tmp = std::getenv("TEST_TMPDIR");
  o.cache_dir = tmp != nullptr ? tmp : "/tmp/kiln_wmma_test";  // really compile
  return CudaCompiler::Create(o);
}

TEST(WmmaNvrtc, SampleKernelsCompile) {
  auto ptx = Nvrtc("compute_80");
  if (!ptx.ok()) GTEST_SKIP() << "NVRTC not available: " << ptx.status();
  std::vector<MatmulSpec> specs = SampleSpecs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string name = absl::StrCat("wmma_sample_", i);
    WmmaKernel w = RenderWmma(name, specs[i]);
    auto text = (*ptx)->Compile(w.source);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_NE(text->find(".entry " + name), std::string::npos);
    EXPECT_NE(text->find("wmma.mma.sync"), std::string::npos) << specs[i].ToString();
    for (int sm : {75, 80, 90}) {  // NVRTC 13 no longer targets sm_70
      if (!WmmaSupported(specs[i], sm)) continue;
      auto cubin = Nvrtc(absl::StrCat("sm_", sm));
      ASSERT_TRUE(cubin.ok()) << cubin.status();
      auto bin = (*cubin)->Compile(w.source);
      ASSERT_TRUE(bin.ok()) << "sm_" << sm << ": " << bin.status();
      EXPECT_NE(bin->find(name), std::string::npos);  // the symbol of the cubin
    }
  }
  std::printf("compiled %zu WMMA kernels with %s\n", specs.size(), (*ptx)->version().c_str());
}

// A CUDA device that only compiles (NVRTC, no driver): enough for
// Engine::GetKernels, which never launches.
class CompileOnlyCuda : public Device {
 public:
  CompileOnlyCuda(std::unique_ptr<CudaCompiler> c, int sm)
      : Device("CUDA_COMPILE_ONLY"), compiler_(std::move(c)), sm_(sm) {}
  std::string renderer() const override { return "cuda"; }
  int compute_capability() const override { return sm_; }
  Allocator& allocator() override { return allocator_; }
  Compiler& compiler() override { return *compiler_; }
  absl::StatusOr<std::unique_ptr<Program>> LoadProgram(const std::string& function,
                                                       const std::string& binary) override {
    EXPECT_FALSE(binary.empty());
    return std::unique_ptr<Program>(new NoLaunch(function));
  }

 private:
  struct NoLaunch : Program {
    explicit NoLaunch(std::string name) : Program(std::move(name)) {}
    absl::Status Launch(const std::vector<void*>&, const std::vector<int64_t>&, const LaunchDims&,
                        bool, double*) override {
      return absl::UnimplementedError("compile-only device");
    }
  };
  struct NoMemory : Allocator {
    absl::Status CopyIn(void*, const void*, size_t) override { return Unavailable(); }
    absl::Status CopyOut(void*, const void*, size_t) override { return Unavailable(); }
    absl::StatusOr<void*> RawAlloc(size_t) override { return Unavailable(); }
    void RawFree(void*, size_t) override {}
    static absl::Status Unavailable() { return absl::UnimplementedError("compile-only device"); }
  };
  std::unique_ptr<CudaCompiler> compiler_;
  const int sm_;
  NoMemory allocator_;
};

TEST(WmmaEngine, GetKernelsUsesTensorCoresWhereTheyApply) {
  Engine* e = TestEngine();
  Tensor a = Tensor::Empty(e, {64, 32}, kF16), b = Tensor::Empty(e, {32, 48}, kF16);
  Tensor bias = Tensor::Empty(e, {48}, kF16);
  UOpList asts;
  Tensor bf = Tensor::Empty(e, {32, 64}, kBF16).Matmul(Tensor::Empty(e, {64, 16}, kBF16));
  for (const Tensor& t : {a.Matmul(b), a.Matmul(b) + bias, bf}) {
    auto sched = CreateSchedule({t.uop()}, "CPU");
    ASSERT_TRUE(sched.ok()) << sched.status();
    asts.push_back(sched->items.back().ast);
  }
  for (int sm : {75, 90}) {
    auto nvrtc = Nvrtc(absl::StrCat("sm_", sm));
    if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status();
    CompileOnlyCuda dev(std::move(*nvrtc), sm);
    DeviceRegistry registry;
    Engine engine(&registry);
    auto kernels = engine.GetKernels(&dev, asts);
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    const CompiledKernel& mm = *(*kernels)[0];
    const CompiledKernel& with_bias = *(*kernels)[1];
    const CompiledKernel& bf16 = *(*kernels)[2];
    // sm_75: the fp16 result needs sm_80 (WmmaSupported), bf16 too.
    const bool tc = sm >= 80;
    EXPECT_EQ(mm.name.rfind("wmma_", 0) == 0, tc) << mm.name;
    EXPECT_EQ(mm.opts == std::vector<std::string>{"WMMA"}, tc);
    EXPECT_EQ(bf16.name.rfind("wmma_", 0) == 0, tc) << bf16.name;
    EXPECT_NE(with_bias.name.rfind("wmma_", 0), 0u) << with_bias.name;
    if (tc) {
      EXPECT_EQ(mm.num_bufs, 3);
      EXPECT_TRUE(mm.vars.empty());
      EXPECT_EQ(mm.dims.local[0], 128);
      EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 64 * 48 * 32);
      EXPECT_NE(mm.source.find("wmma::mma_sync"), std::string::npos);
    }
  }
}

// On a machine with a CUDA GPU: the engine's results on CUDA (tensor cores
// where the GPU has them) against the interpreter.
TEST(WmmaCuda, MatmulsMatchTheInterpreter) {
  if (!DeviceAvailable("CUDA")) GTEST_SKIP() << "no CUDA driver";
  Engine* e = TestEngine();
  Device* cuda = *e->GetDevice("CUDA");
  const auto* nvrtc = dynamic_cast<const CudaCompiler*>(&cuda->compiler());
  ASSERT_NE(nvrtc, nullptr);
  struct Case {
    Shape a, b;
    DType dt;
    bool transpose_a;
  };
  const Case cases[] = {{{64, 32}, {32, 48}, kF16, false},
                        {{256, 128}, {128, 512}, kF16, false},
                        {{32, 96}, {32, 64}, kF16, true},
                        {{4, 64, 64}, {4, 64, 32}, kF16, false},
                        {{128, 64}, {64, 128}, kBF16, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.dt.Name(), " ", c.a.size(), "-d, transposed A: ", c.transpose_a));
    std::vector<double> results[2];
    const char* devices[2] = {"CUDA", "INTERP"};
    for (int d = 0; d < 2; ++d) {
      // Realized 16-bit inputs (Contiguous), so the matmul kernel loads them.
      Tensor a = gpu_test::Input(e, devices[d], c.a, c.dt, 1).Contiguous();
      Tensor b = gpu_test::Input(e, devices[d], c.b, c.dt, 2).Contiguous();
      Tensor r = (c.transpose_a ? a.Transpose() : a).Matmul(b);
      if (d == 0) {  // which kernel computes it on this GPU
        auto sched = CreateSchedule({r.uop()}, "CUDA");
        ASSERT_TRUE(sched.ok()) << sched.status();
        auto k = e->GetKernels(cuda, {sched->items.back().ast});
        ASSERT_TRUE(k.ok()) << k.status();
        std::printf("%s: %s\n", nvrtc->arch().c_str(), (*k)[0]->name.c_str());
        if (std::atoi(nvrtc->arch().c_str() + 3) >= 80) {
          EXPECT_EQ((*k)[0]->name.rfind("wmma_", 0), 0u);
        }
      }
      results[d] = Values(r);
    }
    ExpectNear(results[0], results[1], 0.1, gpu_test::Tol(c.dt) * 2);
  }
}

}  // namespace
}  // namespace kiln::wmma_test
