#include "engine/renderer/cuda_wmma.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

// The tiling of one spec: fragments per warp and warps per block, per axis.
struct Tiling {
  int frag_m = 1, frag_n = 1;        // 16x16 fragments per warp
  int warps_m = 1, warps_n = 1;      // warps per block
  int64_t tiles_m = 0, tiles_n = 0;  // warp tiles covering C
  int64_t grid_x = 1, grid_y = 1, grid_z = 1;
};

Tiling TilingOf(const MatmulSpec& s) {
  Tiling t;
  // 2 fragments along an axis reuse each loaded A / B fragment twice; only
  // where they divide the axis, so no warp ever needs a per-fragment guard.
  t.frag_m = s.m % 32 == 0 ? 2 : 1;
  t.frag_n = s.n % 32 == 0 ? 2 : 1;
  t.tiles_m = s.m / (16 * t.frag_m);
  t.tiles_n = s.n / (16 * t.frag_n);
  t.warps_m = t.tiles_m >= 2 ? 2 : 1;
  t.warps_n = t.tiles_n >= 2 ? 2 : 1;
  t.grid_x = (t.tiles_n + t.warps_n - 1) / t.warps_n;
  t.grid_y = (t.tiles_m + t.warps_m - 1) / t.warps_m;
  t.grid_z = s.batch_count();
  return t;
}

std::string CType(DType d) {
  if (d == dtypes::kFloat16) return "half";
  if (d == dtypes::kBFloat16) return "__nv_bfloat16";
  return "float";
}

std::string Layout(MatLayout l) {
  return l == MatLayout::kRowMajor ? "wmma::row_major" : "wmma::col_major";
}

// Offset of element (row, col) of a matrix with layout `l` and leading
// dimension `ld`, as C source.
std::string Offset(MatLayout l, int64_t ld, const std::string& row, const std::string& col) {
  if (l == MatLayout::kRowMajor) return absl::StrCat("(", row, ") * ", ld, " + ", col);
  return absl::StrCat(row, " + (", col, ") * ", ld);
}

// Moves a / b / c to the batch blockIdx.z selects (innermost axis first).
std::string BatchOffsets(const MatmulSpec& s) {
  if (s.batch.empty()) return "";
  std::string out = "  long long z = blockIdx.z;\n";
  for (size_t i = s.batch.size(); i-- > 0;) {
    const MatmulSpec::BatchAxis& b = s.batch[i];
    std::string idx = "z";
    if (i > 0) {
      absl::StrAppend(&out, "  const long long z", i, " = z % ", b.size, ";\n  z /= ", b.size,
                      ";\n");
      idx = absl::StrCat("z", i);
    }
    const std::pair<const char*, int64_t> moves[] = {
        {"a", b.stride_a}, {"b", b.stride_b}, {"c", b.stride_c}};
    for (const auto& [ptr, stride] : moves)
      if (stride != 0) absl::StrAppend(&out, "  ", ptr, " += ", idx, " * ", stride, ";\n");
  }
  return out;
}

// Stores fragment acc[i][j] to `dst`, converting to a 16-bit C type if needed.
std::string StoreTile(const MatmulSpec& s, const std::string& dst) {
  const std::string ld = absl::StrCat(s.ldc);
  if (s.out_dtype == dtypes::kFloat32)
    return absl::StrCat("      wmma::store_matrix_sync(", dst, ", acc[i][j], ", ld,
                        ", wmma::mem_row_major);\n");
  const bool bf16 = s.out_dtype == dtypes::kBFloat16;
  // bfloat16 has no accumulator fragment: its bit patterns ride in a half
  // one, and the store only moves 16-bit values.
  const std::string conv = bf16 ? "__ushort_as_half(__bfloat16_as_ushort(__float2bfloat16("
                                  "acc[i][j].x[e])))"
                                : "__float2half(acc[i][j].x[e])";
  return absl::StrCat("      wmma::fragment<wmma::accumulator, 16, 16, 16, half> h;\n",
                      "      for (int e = 0; e < h.num_elements; ++e) h.x[e] = ", conv, ";\n",
                      "      wmma::store_matrix_sync(",
                      bf16 ? absl::StrCat("reinterpret_cast<half*>(", dst, ")") : dst, ", h, ", ld,
                      ", wmma::mem_row_major);\n");
}

std::string Params(const MatmulSpec& s) {
  std::vector<std::string> params;
  for (int p = 0; p < s.num_bufs; ++p) {
    const bool out = p == s.param_c;
    absl::StrAppend(&params.emplace_back(), out ? "" : "const ",
                    CType(out ? s.out_dtype : s.in_dtype), "* __restrict__ data", p);
  }
  return absl::StrJoin(params, ", ");
}

}  // namespace

bool WmmaSupported(const MatmulSpec& spec, int sm, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (sm < 70) return no(absl::StrCat("sm_", sm, " has no tensor cores (WMMA needs sm_70)"));
  if (spec.in_dtype == dtypes::kBFloat16 && sm < 80)
    return no(absl::StrCat("bfloat16 WMMA needs sm_80, not sm_", sm));
  if (spec.out_dtype != dtypes::kFloat32 && sm < 80)
    return no(absl::StrCat(
        "converting accumulator fragments element by element needs sm_80, not sm_", sm));
  Tiling t = TilingOf(spec);
  if (t.grid_x > 2147483647 || t.grid_y > 65535 || t.grid_z > 65535)
    return no(absl::StrCat("grid ", t.grid_x, "x", t.grid_y, "x", t.grid_z, " too large"));
  return true;
}

WmmaKernel RenderWmma(const std::string& name, const MatmulSpec& s) {
  const Tiling t = TilingOf(s);
  const int threads = 32 * t.warps_m * t.warps_n;
  const std::string in = CType(s.in_dtype), out = CType(s.out_dtype);
  std::string src;
  // One line of source at `depth` levels of indentation.
  auto line = [&src](int depth, const auto&... parts) {
    src += std::string(2 * depth, ' ');
    src += absl::StrCat(parts...);
    src += "\n";
  };
  line(0, "// WMMA matmul ", s.ToString());
  line(0, "// warp tile ", 16 * t.frag_m, "x", 16 * t.frag_n, ", ", t.warps_m, "x", t.warps_n,
       " warps per block, float32 accumulators");
  line(0, "#include <mma.h>");
  line(0, "#include <cuda_fp16.h>");
  line(0, "#include <cuda_bf16.h>");
  line(0, "extern \"C\" __global__ void __launch_bounds__(", threads, ") ", name, "(", Params(s),
       ") {");
  line(1, "using namespace nvcuda;");
  line(1, "const int warp = threadIdx.x / 32;");
  line(1, "const long long tm = (long long)blockIdx.y * ", t.warps_m, " + warp / ", t.warps_n, ";");
  line(1, "const long long tn = (long long)blockIdx.x * ", t.warps_n, " + warp % ", t.warps_n, ";");
  // Warps of edge blocks past the last tile leave as a whole (warp-uniform).
  if (t.tiles_m % t.warps_m != 0 || t.tiles_n % t.warps_n != 0)
    line(1, "if (tm >= ", t.tiles_m, " || tn >= ", t.tiles_n, ") return;");
  line(1, "const ", in, "* a = data", s.param_a, ";");
  line(1, "const ", in, "* b = data", s.param_b, ";");
  line(1, out, "* c = data", s.param_c, ";");
  src += BatchOffsets(s);
  line(1, "const long long m0 = tm * ", 16 * t.frag_m, ", n0 = tn * ", 16 * t.frag_n, ";");
  line(1, "wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[", t.frag_m, "][", t.frag_n,
       "];");
  line(1, "for (int i = 0; i < ", t.frag_m, "; ++i)");
  line(2, "for (int j = 0; j < ", t.frag_n, "; ++j) wmma::fill_fragment(acc[i][j], 0.0f);");
  line(1, "wmma::fragment<wmma::matrix_a, 16, 16, 16, ", in, ", ", Layout(s.layout_a), "> fa[",
       t.frag_m, "];");
  line(1, "wmma::fragment<wmma::matrix_b, 16, 16, 16, ", in, ", ", Layout(s.layout_b), "> fb[",
       t.frag_n, "];");
  line(1, "for (int k = 0; k < ", s.k, "; k += 16) {");
  line(2, "for (int i = 0; i < ", t.frag_m, "; ++i)");
  line(3, "wmma::load_matrix_sync(fa[i], a + ", Offset(s.layout_a, s.lda, "m0 + 16 * i", "k"), ", ",
       s.lda, ");");
  line(2, "for (int j = 0; j < ", t.frag_n, "; ++j)");
  line(3, "wmma::load_matrix_sync(fb[j], b + ", Offset(s.layout_b, s.ldb, "k", "n0 + 16 * j"), ", ",
       s.ldb, ");");
  line(2, "for (int i = 0; i < ", t.frag_m, "; ++i)");
  line(3, "for (int j = 0; j < ", t.frag_n, "; ++j)");
  line(4, "wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);");
  line(1, "}");
  line(1, "for (int i = 0; i < ", t.frag_m, "; ++i)");
  line(2, "for (int j = 0; j < ", t.frag_n, "; ++j) {");
  src += StoreTile(
      s, absl::StrCat("c + ", Offset(MatLayout::kRowMajor, s.ldc, "m0 + 16 * i", "n0 + 16 * j")));
  line(2, "}");
  line(0, "}");

  WmmaKernel kern;
  kern.source = std::move(src);
  kern.global = {t.grid_x, t.grid_y, t.grid_z};
  kern.local = {threads, 1, 1};
  const double batch = static_cast<double>(s.batch_count());
  kern.flops = 2.0 * s.m * s.n * s.k * batch;
  // A batch axis an operand broadcasts over (stride 0) reads it only once.
  double batches_a = 1, batches_b = 1;
  for (const MatmulSpec::BatchAxis& b : s.batch) {
    if (b.stride_a != 0) batches_a *= b.size;
    if (b.stride_b != 0) batches_b *= b.size;
  }
  const int in_bytes = s.in_dtype.ScalarSize();
  kern.bytes =
      (static_cast<double>(s.m) * s.k * batches_a + static_cast<double>(s.k) * s.n * batches_b) *
          in_bytes +
      static_cast<double>(s.m) * s.n * batch * s.out_dtype.ScalarSize();
  return kern;
}

}  // namespace kiln
