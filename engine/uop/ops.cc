#include "engine/uop/ops.h"

#include <cstddef>

namespace kiln {

const char* OpName(Op op) {
  static constexpr const char* kNames[] = {
      "BUFFER", "VIEW", "CONTIGUOUS", "REDUCE_AXIS", "COPY", "BIND", "GATHER", "SINK", "LOAD", "STORE", "VALID",
      "DEFINE_GLOBAL", "DEFINE_VAR", "DEFINE_ACC", "SPECIAL", "RANGE", "ENDRANGE", "ASSIGN",
      "VECTORIZE", "GEP", "BARRIER", "DEFINE_LOCAL", "IF", "ENDIF", "CONST", "CAST", "BITCAST",
      "NEG", "EXP2", "LOG2", "SIN", "SQRT", "RECIP", "TRUNC", "ADD", "SUB", "MUL", "FDIV", "IDIV",
      "MOD", "MAX", "CMPLT", "CMPNE", "CMPEQ", "AND", "OR", "XOR", "SHL", "SHR", "POW", "WHERE",
      "MULACC"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(Op::kNumOps),
                "OpName table out of date");
  return kNames[static_cast<int>(op)];
}

bool IsZeroPreserving(Op op) {
  switch (op) {
    case Op::kNeg: case Op::kSin: case Op::kSqrt: case Op::kTrunc: case Op::kAdd:
    case Op::kSub: case Op::kMul: case Op::kMax: case Op::kCmpNe: case Op::kAnd:
    case Op::kOr: case Op::kXor: case Op::kShl: case Op::kShr: case Op::kCast:
    case Op::kBitcast: case Op::kCmpLt: case Op::kMulAcc:
      return true;
    default:
      return false;
  }
}

}  // namespace kiln
