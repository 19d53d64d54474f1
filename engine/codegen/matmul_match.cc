#include "engine/codegen/matmul_match.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace kiln {
namespace {

bool Is16BitFloat(DType d) { return d == dtypes::kFloat16 || d == dtypes::kBFloat16; }

// The two loads of a product that feeds a float32 accumulator, in either
// form MatchMatmul accepts (see the header).
bool ProductLoads(const UOp* p, const UOp** x, const UOp** y) {
  if (p->dtype() != dtypes::kFloat32) return false;
  if (p->op() == Op::kCast) {  // CAST_f32(MUL(LOAD, LOAD))
    const UOp* mul = p->src(0).get();
    if (mul->op() != Op::kMul || !Is16BitFloat(mul->dtype())) return false;
    *x = mul->src(0).get();
    *y = mul->src(1).get();
  } else if (p->op() == Op::kMul) {  // MUL(CAST_f32(LOAD), CAST_f32(LOAD))
    const UOp* cx = p->src(0).get();
    const UOp* cy = p->src(1).get();
    // Without both casts the loads are float32 themselves: not for tensor cores.
    if (cx->op() != Op::kCast || cy->op() != Op::kCast) return false;
    *x = cx->src(0).get();
    *y = cy->src(0).get();
  } else {
    return false;
  }
  return (*x)->op() == Op::kLoad && (*y)->op() == Op::kLoad;
}

// Strides of a memory op whose view is one unmasked view at offset 0.
std::optional<std::vector<int64_t>> PlainStrides(const Kernel& k, const UOp* mem) {
  const ShapeTracker& st = k.StOf(mem);
  if (st.views().size() != 1) return std::nullopt;
  // A gather's load (a LOAD with an offset source) moves by data.
  if (mem->op() == Op::kLoad && mem->src().size() > 1) return std::nullopt;
  const View& v = st.view();
  if (v.mask() || v.offset() != 0 || v.symbolic_offset()) return std::nullopt;
  return v.strides();
}

int ParamOf(const UOp* mem) { return static_cast<int>(mem->src(0)->arg().Int()); }

// Leading dimensions must be multiples of 8 elements: WMMA's rule for 16-bit
// types (16 bytes), kept for float32 C too so one rule covers all operands.
bool GoodLd(int64_t ld) { return ld > 0 && ld % 8 == 0; }

}  // namespace

std::optional<MatmulSpec> MatchMatmul(const Kernel& k) {
  const UOp* store = k.ast()->src(0).get();
  const UOp* value = store->src(1).get();
  const DType out_dtype = value->dtype();
  if (value->op() == Op::kCast) value = value->src(0).get();
  if (value->op() != Op::kReduceAxis || value != k.reduce() || ReduceOpOf(*value) != Op::kAdd ||
      value->dtype() != dtypes::kFloat32)
    return std::nullopt;
  const UOp* x = nullptr;
  const UOp* y = nullptr;
  if (!ProductLoads(value->src(0).get(), &x, &y)) return std::nullopt;
  const DType in_dtype = x->dtype();
  if (!Is16BitFloat(in_dtype) || y->dtype() != in_dtype) return std::nullopt;
  if (out_dtype != dtypes::kFloat32 && out_dtype != in_dtype) return std::nullopt;

  // Kernel::Create puts the reduce axes last and merges adjacent ones, so a
  // matmul has exactly one, K, after at least two output axes (M and N).
  const int kax = k.first_reduce();
  if (kax != k.ndim() - 1 || kax < 2) return std::nullopt;
  auto sx = PlainStrides(k, x), sy = PlainStrides(k, y), sc = PlainStrides(k, store);
  if (!sx || !sy || !sc) return std::nullopt;

  // N is the output axis C walks with unit stride; A is the operand that
  // does not move along it.
  int n_ax = -1;
  for (int g = 0; g < kax; ++g)
    if ((*sc)[g] == 1) n_ax = g;
  if (n_ax < 0) return std::nullopt;
  if ((*sx)[n_ax] != 0) {
    std::swap(x, y);
    std::swap(sx, sy);
  }
  const std::vector<int64_t>& sa = *sx;
  const std::vector<int64_t>& sb = *sy;
  if (sa[n_ax] != 0 || sb[n_ax] == 0) return std::nullopt;
  // M: an output axis B does not move along and A does; if several (batch
  // axes that B broadcasts over), the one C walks with the smallest stride.
  int m_ax = -1;
  for (int g = 0; g < kax; ++g) {
    if (g == n_ax || sb[g] != 0 || sa[g] == 0) continue;
    if (m_ax < 0 || (*sc)[g] < (*sc)[m_ax]) m_ax = g;
  }
  if (m_ax < 0) return std::nullopt;

  const Shape& fs = k.full_shape();
  MatmulSpec s;
  s.m = fs[m_ax];
  s.n = fs[n_ax];
  s.k = fs[kax];
  s.in_dtype = in_dtype;
  s.out_dtype = out_dtype;
  if (s.m % 16 != 0 || s.n % 16 != 0 || s.k % 16 != 0) return std::nullopt;
  if (sa[kax] == 1) {
    s.layout_a = MatLayout::kRowMajor;
    s.lda = sa[m_ax];
  } else if (sa[m_ax] == 1) {
    s.layout_a = MatLayout::kColMajor;
    s.lda = sa[kax];
  } else {
    return std::nullopt;
  }
  if (sb[n_ax] == 1) {
    s.layout_b = MatLayout::kRowMajor;
    s.ldb = sb[kax];
  } else if (sb[kax] == 1) {
    s.layout_b = MatLayout::kColMajor;
    s.ldb = sb[n_ax];
  } else {
    return std::nullopt;
  }
  s.ldc = (*sc)[m_ax];
  // ldc >= n: rows of C never overlap, so no two warps write one element.
  if (!GoodLd(s.lda) || !GoodLd(s.ldb) || !GoodLd(s.ldc) || s.ldc < s.n) return std::nullopt;
  for (int g = 0; g < kax; ++g) {
    if (g == m_ax || g == n_ax) continue;
    MatmulSpec::BatchAxis b{fs[g], sa[g], sb[g], (*sc)[g]};
    // 16 elements keep every tile of every batch 32-byte aligned.
    for (int64_t st : {b.stride_a, b.stride_b, b.stride_c})
      if (st < 0 || st % 16 != 0) return std::nullopt;
    if (b.stride_c == 0) return std::nullopt;
    s.batch.push_back(b);
  }
  s.param_a = ParamOf(x);
  s.param_b = ParamOf(y);
  s.param_c = ParamOf(store);
  s.num_bufs = std::max({s.param_a, s.param_b, s.param_c}) + 1;
  return s;
}

}  // namespace kiln
