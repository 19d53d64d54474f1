// Runs the WMMA kernels of engine/renderer/cuda_wmma.h on the host: the very
// same source, compiled by clang++ against tests/gpu/wmma_emu.h (installed as
// <mma.h>), one emulated thread per warp. This checks the kernels' index
// math (tiles, layouts, leading dimensions, batch offsets, parameter order,
// idle edge warps) without a GPU:
//  * hand-made specs (SampleSpecs) against a float64 reference computed from
//    the layouts as MatmulSpec defines them, on random 16-bit inputs;
//  * matmuls of real tensors, MatchMatmul + RenderWmma, against the
//    interpreter's result for the same graph.
// What it cannot check: the real fragment layouts, the hardware's rounding
// and anything about speed. Skipped when clang++ is missing.
#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/renderer/cuda_wmma.h"
#include "tests/gpu/wmma_test_util.h"

namespace kiln::wmma_test {
namespace {

using Bytes = std::vector<uint8_t>;

float Load(DType dt, const Bytes& b, int64_t i) {
  const int size = dt.ScalarSize();
  if (dt == dtypes::kFloat32) {
    float f;
    std::memcpy(&f, &b[i * size], 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, &b[i * size], 2);
  return dt == dtypes::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
}

void Store(DType dt, float v, Bytes* b, int64_t i) {
  if (dt == dtypes::kFloat32) {
    std::memcpy(&(*b)[i * 4], &v, 4);
    return;
  }
  uint16_t bits = dt == dtypes::kFloat16 ? FloatToHalf(v) : FloatToBFloat16(v);
  std::memcpy(&(*b)[i * 2], &bits, 2);
}

// Element (r, c) of operand 'a', 'b' or 'c' in the batch with per-axis
// indices `bi`, as MatmulSpec defines it.
int64_t Index(const MatmulSpec& s, char op, const std::vector<int64_t>& bi, int64_t r, int64_t c) {
  int64_t base = 0;
  for (size_t i = 0; i < s.batch.size(); ++i) {
    const MatmulSpec::BatchAxis& ax = s.batch[i];
    base += bi[i] * (op == 'a' ? ax.stride_a : op == 'b' ? ax.stride_b : ax.stride_c);
  }
  const MatLayout l = op == 'a' ? s.layout_a : op == 'b' ? s.layout_b : MatLayout::kRowMajor;
  const int64_t ld = op == 'a' ? s.lda : op == 'b' ? s.ldb : s.ldc;
  return base + (l == MatLayout::kRowMajor ? r * ld + c : r + c * ld);
}

// Per-axis indices of every batch, outermost axis first (row-major).
std::vector<std::vector<int64_t>> Batches(const MatmulSpec& s) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t z = 0; z < s.batch_count(); ++z) {
    std::vector<int64_t> bi(s.batch.size());
    int64_t rest = z;
    for (size_t i = s.batch.size(); i-- > 0;) {
      bi[i] = rest % s.batch[i].size;
      rest /= s.batch[i].size;
    }
    out.push_back(bi);
  }
  return out;
}

// Elements of operand `op` the spec reaches.
int64_t Extent(const MatmulSpec& s, char op) {
  std::vector<int64_t> last;
  for (const MatmulSpec::BatchAxis& ax : s.batch) last.push_back(ax.size - 1);
  const int64_t rows = op == 'b' ? s.k : s.m, cols = op == 'a' ? s.k : s.n;
  return Index(s, op, last, rows - 1, cols - 1) + 1;
}

std::string FindClang() {
  const char* env = std::getenv("PATH");
  std::string path = absl::StrCat(env != nullptr ? env : "", ":/usr/bin:/usr/local/bin");
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string c = absl::StrCat(dir, "/clang++");
    if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// WMMA kernels compiled for the host into one shared object.
class HostKernels {
 public:
  ~HostKernels() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  void Add(const std::string& name, const std::string& source) {
    absl::StrAppend(&source_, source, "extern \"C\" void kiln_emu_run_", name,
                    "(void* const* bufs, const long long* grid, long long threads) {\n",
                    "  kiln_emu::Launch(&", name, ", bufs, grid, threads);\n}\n");
  }
  // Compiles what was added; false (with the reason in *error) on failure.
  bool Build(const std::string& clang, std::string* error) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/wmma_emu_", getpid());
    std::string emu = ReadFile("tests/gpu/wmma_emu.h");
    if (emu.empty()) return Fail("cannot read tests/gpu/wmma_emu.h", error);
    if (std::system(absl::StrCat("mkdir -p ", dir).c_str()) != 0)
      return Fail("mkdir " + dir, error);
    std::ofstream(dir + "/mma.h") << emu;
    std::ofstream(dir + "/cuda_fp16.h") << "#include <mma.h>\n";
    std::ofstream(dir + "/cuda_bf16.h") << "#include <mma.h>\n";
    std::ofstream(dir + "/kernels.cc") << source_;
    const std::string so = dir + "/kernels.so", log = dir + "/clang.log";
    const std::string cmd =
        absl::StrCat(clang, " -x c++ -std=c++17 -O1 -fPIC -shared -fno-strict-aliasing -I", dir,
                     " ", dir, "/kernels.cc -o ", so, " > ", log, " 2>&1");
    if (std::system(cmd.c_str()) != 0) return Fail(cmd + "\n" + ReadFile(log), error);
    handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) return Fail(dlerror(), error);
    return true;
  }
  // Runs kernel `name` with the geometry of `w` on `bufs` (in parameter order).
  void Run(const std::string& name, const WmmaKernel& w, std::vector<Bytes>* bufs) {
    using RunFn = void (*)(void* const*, const long long*, long long);
    auto fn = reinterpret_cast<RunFn>(dlsym(handle_, ("kiln_emu_run_" + name).c_str()));
    ASSERT_NE(fn, nullptr) << name;
    ASSERT_EQ(w.local[1] * w.local[2], 1);
    std::vector<void*> ptrs;
    for (Bytes& b : *bufs) ptrs.push_back(b.data());
    const long long grid[3] = {w.global[0], w.global[1], w.global[2]};
    fn(ptrs.data(), grid, w.local[0]);
  }

 private:
  static bool Fail(const std::string& why, std::string* error) {
    *error = why;
    return false;
  }
  std::string source_;
  void* handle_ = nullptr;
};

// Random 16-bit inputs for every parameter of `s`, and a C filled with NaN
// so that elements the kernel must not write stay recognizable.
std::vector<Bytes> Inputs(const MatmulSpec& s, std::mt19937* rng) {
  std::vector<Bytes> bufs(s.num_bufs);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int p = 0; p < s.num_bufs; ++p) {
    if (p == s.param_c) {
      bufs[p].assign(Extent(s, 'c') * s.out_dtype.ScalarSize(), 0xff);  // NaN in every dtype
      continue;
    }
    int64_t n = std::max(p == s.param_a ? Extent(s, 'a') : 0, p == s.param_b ? Extent(s, 'b') : 0);
    bufs[p].resize(n * s.in_dtype.ScalarSize());
    for (int64_t i = 0; i < n; ++i) Store(s.in_dtype, dist(*rng), &bufs[p], i);
  }
  return bufs;
}

// Tolerance of the output rounding: half an ulp of the output dtype, doubled.
double OutRtol(DType dt) {
  return dt == dtypes::kFloat32 ? 0 : dt == dtypes::kFloat16 ? 1.0 / 1024 : 1.0 / 128;
}

TEST(WmmaEmulation, SampleSpecsMatchTheReference) {
  const std::string clang = FindClang();
  if (clang.empty()) GTEST_SKIP() << "clang++ not found";
  std::vector<MatmulSpec> specs = SampleSpecs();
  HostKernels host;
  std::vector<WmmaKernel> kernels;
  for (size_t i = 0; i < specs.size(); ++i) {
    kernels.push_back(RenderWmma(absl::StrCat("wmma_emu_", i), specs[i]));
    host.Add(absl::StrCat("wmma_emu_", i), kernels.back().source);
  }
  std::string error;
  ASSERT_TRUE(host.Build(clang, &error)) << error;
  std::mt19937 rng(7);
  for (size_t si = 0; si < specs.size(); ++si) {
    const MatmulSpec& s = specs[si];
    SCOPED_TRACE(s.ToString());
    std::vector<Bytes> bufs = Inputs(s, &rng);
    const std::vector<Bytes> in = bufs;
    host.Run(absl::StrCat("wmma_emu_", si), kernels[si], &bufs);
    const Bytes& c = bufs[s.param_c];
    std::vector<bool> written(Extent(s, 'c'), false);
    int bad = 0;
    for (const std::vector<int64_t>& bi : Batches(s))
      for (int64_t r = 0; r < s.m; ++r)
        for (int64_t col = 0; col < s.n; ++col) {
          double want = 0, mag = 0;
          for (int64_t k = 0; k < s.k; ++k) {
            double p =
                static_cast<double>(Load(s.in_dtype, in[s.param_a], Index(s, 'a', bi, r, k))) *
                Load(s.in_dtype, in[s.param_b], Index(s, 'b', bi, k, col));
            want += p;
            mag += std::abs(p);
          }
          const int64_t ci = Index(s, 'c', bi, r, col);
          written[ci] = true;
          const double got = Load(s.out_dtype, c, ci);
          // float32 sums of exact products, then the output's rounding.
          const double tol = 1e-5 * mag + OutRtol(s.out_dtype) * std::abs(want) + 1e-30;
          if (!(std::abs(got - want) <= tol) && ++bad <= 5)
            ADD_FAILURE() << "C[" << ci << "] = (" << r << ", " << col << "): got " << got
                          << " want " << want;
        }
    // Padding between rows (ldc > n) is never written.
    for (size_t i = 0; i < written.size(); ++i) {
      if (!written[i]) {
        EXPECT_TRUE(std::isnan(Load(s.out_dtype, c, i))) << "wrote padding " << i;
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

// Matmuls of real tensors: match, render, run on the host, and compare with
// what the interpreter computes for the same graph.
TEST(WmmaEmulation, TensorMatmulsMatchTheInterpreter) {
  const std::string clang = FindClang();
  if (clang.empty()) GTEST_SKIP() << "clang++ not found";
  Engine* e = TestEngine();
  struct Case {
    Shape a, b;   // as stored
    bool ta, tb;  // transposed before the matmul
    DType dt;
    bool f32_out;  // the float32 sum not cast back
  };
  const Case cases[] = {
      {{64, 32}, {32, 48}, false, false, dtypes::kFloat16, false},
      {{32, 64}, {32, 48}, true, false, dtypes::kFloat16, false},
      {{64, 32}, {48, 32}, false, true, dtypes::kBFloat16, false},
      {{2, 64, 32}, {2, 32, 64}, false, false, dtypes::kFloat16, true},
      {{32, 32}, {3, 32, 48}, false, false, dtypes::kBFloat16, true},
  };
  std::mt19937 rng(11);
  // Multiples of 1/8 in [-2, 2]: exact in both 16-bit types, and so are their
  // products, so the interpreter (which rounds each product to the input
  // dtype) and the tensor cores (which do not) agree up to the output rounding.
  std::uniform_int_distribution<int> eighths(-16, 16);
  auto bits = [&](const Shape& shape, DType dt) {
    std::vector<uint16_t> v(Prod(shape));
    for (uint16_t& x : v) {
      float f = eighths(rng) / 8.0f;
      x = dt == dtypes::kFloat16 ? FloatToHalf(f) : FloatToBFloat16(f);
    }
    return v;
  };
  HostKernels host;
  struct Prepared {
    MatmulSpec spec;
    WmmaKernel kernel;
    std::vector<Bytes> bufs;
    std::vector<double> want;
  };
  std::vector<Prepared> runs;
  for (const Case& c : cases) {
    std::vector<uint16_t> va = bits(c.a, c.dt), vb = bits(c.b, c.dt);
    Tensor a = Tensor::FromVector(e, va, c.a, c.dt, "INTERP");
    Tensor b = Tensor::FromVector(e, vb, c.b, c.dt, "INTERP");
    Tensor x = c.ta ? a.Transpose() : a, y = c.tb ? b.Transpose() : b;
    Tensor r = c.f32_out ? Float32Matmul(x, y) : x.Matmul(y);
    ScheduleItem item;
    std::optional<MatmulSpec> s = MatchOf(r, &item);
    ASSERT_TRUE(s.has_value()) << "not matched: " << c.a.size() << "-d " << c.dt.Name();
    Prepared p{*s, RenderWmma(absl::StrCat("wmma_tensor_", runs.size()), *s), {}, Values(r)};
    host.Add(absl::StrCat("wmma_tensor_", runs.size()), p.kernel.source);
    for (int i = 0; i < s->num_bufs; ++i) {
      const UOp* buf = BaseBuffer(item.bufs[i].get());
      const std::vector<uint16_t>* data = buf == BaseBuffer(a.uop().get())   ? &va
                                          : buf == BaseBuffer(b.uop().get()) ? &vb
                                                                             : nullptr;
      ASSERT_EQ(data == nullptr, i == s->param_c) << "parameter " << i;
      if (data == nullptr) {
        p.bufs.emplace_back(p.want.size() * s->out_dtype.ScalarSize(), 0xff);
      } else {
        const auto* raw = reinterpret_cast<const uint8_t*>(data->data());
        p.bufs.emplace_back(raw, raw + data->size() * 2);
      }
    }
    runs.push_back(std::move(p));
  }
  std::string error;
  ASSERT_TRUE(host.Build(clang, &error)) << error;
  for (size_t i = 0; i < runs.size(); ++i) {
    Prepared& p = runs[i];
    SCOPED_TRACE(p.spec.ToString());
    host.Run(absl::StrCat("wmma_tensor_", i), p.kernel, &p.bufs);
    std::vector<double> got;
    for (size_t j = 0; j < p.want.size(); ++j)
      got.push_back(Load(p.spec.out_dtype, p.bufs[p.spec.param_c], j));
    ExpectNear(got, p.want, 1e-6, OutRtol(p.spec.out_dtype));
  }
}

}  // namespace
}  // namespace kiln::wmma_test
