// Queries of a kernel's shape that the CPU heuristics (kernel_cpu.cc)
// decide from: the register tile so far, the bytes of the operands that
// change along each axis, sliding windows, transcendental arithmetic.
#include "engine/codegen/kernel.h"

namespace kiln {

std::vector<int64_t> Kernel::GlobalTiles() const {
  std::vector<int64_t> tile(first_reduce_, 1);
  for (const Opt& o : applied_)
    if (o.op == OptOp::kUpcast && o.axis < first_reduce_) tile[o.axis] *= o.amount;
  return tile;
}

std::vector<double> Kernel::OperandBytesAlong() const {
  const UOp* store = ast_->src(0).get();
  std::vector<double> bytes(first_reduce_, 0);
  for (const UOp* m : mems_) {
    std::vector<int64_t> st;
    if (m == store || !Strides(m, &st)) continue;
    const double b = static_cast<double>(sts_.at(m).RealSize()) * m->dtype().ItemSize();
    for (int a = 0; a < first_reduce_; ++a)
      if (st[a] != 0) bytes[a] += b;
  }
  return bytes;
}

int64_t Kernel::WindowStep(int u, int r) const {
  const UOp* store = ast_->src(0).get();
  const int64_t k = full_shape_[r];
  if (k < 2 || k > 7 || u == vector_axis_) return 0;
  for (const UOp* m : mems_) {
    std::vector<int64_t> st;
    if (m == store || m->op() == Op::kValid || !Strides(m, &st) || st[r] <= 0) continue;
    if (st[u] <= 0 || st[u] % st[r] != 0) continue;
    const int64_t step = st[u] / st[r];
    if (step < k) return step;
  }
  return 0;
}

bool Kernel::ComputeBoundElementwise() const { return !reduce_ && Transcendental(); }

bool Kernel::Transcendental() const {
  for (const UOp* u : Toposort(ast_)) {
    switch (u->op()) {
      case Op::kExp2: case Op::kLog2: case Op::kSin: case Op::kSqrt: case Op::kPow:
      case Op::kRecip: case Op::kFDiv:
        return true;
      default:
        break;
    }
  }
  return false;
}

bool Kernel::HasWindow() const {
  for (int r = first_reduce_; r < first_upcast(); ++r)
    for (int u = 0; u < first_reduce_; ++u)
      if (WindowStep(u, r) > 0) return true;
  return false;
}

}  // namespace kiln
