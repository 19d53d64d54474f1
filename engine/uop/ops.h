// The Op enum of kiln's IR, shared by the tensor graph, kernel ASTs and the
// linear kernel IR, plus the op groups the passes dispatch on.
#ifndef KILN_ENGINE_UOP_OPS_H_
#define KILN_ENGINE_UOP_OPS_H_

#include <cstdint>


namespace kiln {

enum class Op : uint8_t {
  // --- tensor graph (lazy) ---
  kBuffer,      // a realized device buffer; arg: opaque buffer handle
  kView,        // movement of src[0]; arg: opaque ShapeTracker
  kContiguous,  // force src[0] to be realized into its own buffer
  kReduceAxis,  // arg: ints {reduce op (as Op), axis...}; also in kernel ASTs
  kCopy,        // copy src[0] to another device; arg: opaque device handle
  kBind,        // a DEFINE_VAR bound to a value for one realize: src = {var, CONST value};
                // only inside view offsets of the tensor graph (see View)
  kGather,      // indexed load: src = {x, idx (int, output shape)}; arg: ints {axis, n,
                // out dim of each x dim (-1 for axis)}: out[o] = x[.., idx[o] at axis, ..]
                // where 0 <= idx[o] < n, else 0 (see Tensor::GatherLoad)
  // --- kernel AST ---
  kSink,   // root of a kernel AST: src = stores
  kLoad,   // AST: src[0]=kDefineGlobal, arg=ShapeTracker. Linear: src = buf, idx[, gate, alt]
  kStore,  // AST: src = {kDefineGlobal, value}, arg=ShapeTracker. Linear: src = buf, idx, value[, gate]
  kValid,  // AST: mask of a ShapeTracker as bool; arg=ShapeTracker
  // --- linear kernel IR ---
  kDefineGlobal,  // arg: parameter index; dtype: pointer
  kDefineVar,     // a symbolic variable; arg: string name; src = {CONST min, CONST max}
  kDefineAcc,     // an accumulator; src = {init value, ranges...}
  kSpecial,       // GPU index; arg: string name ("gidx0", "lidx1"); src[0] = size
  kRange,         // loop; src = {start, end}; arg: {id, kind} (kind: 0 serial, 1 parallel,
                  // kParallelSegment: a parallel loop over [start, end) of a larger range)
  kEndRange,      // closes src[0] (a kRange)
  kAssign,        // acc = value; src = {acc, value}
  kVectorize,     // build a vector from scalars src[0..n)
  kGep,           // element arg of vector src[0]
  kBarrier,       // GPU workgroup barrier
  kDefineLocal,   // GPU local memory; arg: {index, size}
  kIf,            // src[0] = condition
  kEndIf,
  // --- values ---
  kConst,  // arg: ConstValue (int64 or double)
  kCast,   // convert value to dtype
  kBitcast,
  // --- ALU: unary ---
  kNeg,
  kExp2,
  kLog2,
  kSin,
  kSqrt,
  kRecip,
  kTrunc,
  // --- ALU: binary ---
  kAdd,
  kSub,
  kMul,
  kFDiv,  // float division
  kIDiv,  // integer division, truncating toward zero (C semantics)
  kMod,   // integer remainder, sign of the dividend (C semantics)
  kMax,
  kCmpLt,
  kCmpNe,
  kCmpEq,
  kAnd,
  kOr,
  kXor,
  kShl,
  kShr,
  kPow,
  // --- ALU: ternary ---
  kWhere,
  kMulAcc,  // a*b + c, floats rounded once (a fused multiply-add)
  kNumOps
};

const char* OpName(Op op);

// kRange's kind: the thread pool's slice of the parallel range is clamped to
// [start, end) (one of several loops that together cover the range).
constexpr int64_t kParallelSegment = 2;

inline bool IsUnaryAlu(Op op) { return op >= Op::kNeg && op <= Op::kTrunc; }
inline bool IsBinaryAlu(Op op) { return op >= Op::kAdd && op <= Op::kPow; }
inline bool IsTernaryAlu(Op op) { return op == Op::kWhere || op == Op::kMulAcc; }
inline bool IsAlu(Op op) { return op >= Op::kNeg && op <= Op::kMulAcc; }
inline bool IsComparison(Op op) {
  return op == Op::kCmpLt || op == Op::kCmpNe || op == Op::kCmpEq;
}
inline bool IsCommutative(Op op) {
  return op == Op::kAdd || op == Op::kMul || op == Op::kMax || op == Op::kCmpNe ||
         op == Op::kCmpEq || op == Op::kAnd || op == Op::kOr || op == Op::kXor;
}
// Ops with f(0) == 0 (and f(0, 0) == 0): a zero-padded region stays zero.
bool IsZeroPreserving(Op op);

}  // namespace kiln

#endif  // KILN_ENGINE_UOP_OPS_H_
