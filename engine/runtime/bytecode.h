// Internal to engine/runtime: the parsed form of the interpreter's textual
// bytecode (see interpreter.h for the format) and its executor.
#ifndef KILN_ENGINE_RUNTIME_BYTECODE_H_
#define KILN_ENGINE_RUNTIME_BYTECODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/base/dtype.h"

namespace kiln::bytecode {

enum class BcOp : uint8_t {
  kDefineGlobal,
  kDefineVar,
  kConst,
  kRange,
  kEndRange,
  kDefineAcc,
  kAssign,
  kLoad,
  kStore,
  kVectorize,
  kGep,
  kCast,
  kBitcast,
  kIf,
  kEndIf,
  kBarrier,
  // unary ALU
  kNeg,
  kExp2,
  kLog2,
  kSin,
  kSqrt,
  kRecip,
  kTrunc,
  // binary ALU
  kAdd,
  kSub,
  kMul,
  kFDiv,
  kIDiv,
  kMod,
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
  // ternary ALU
  kWhere,
  kMulAcc,
};

inline bool IsUnary(BcOp op) { return op >= BcOp::kNeg && op <= BcOp::kTrunc; }
inline bool IsBinary(BcOp op) { return op >= BcOp::kAdd && op <= BcOp::kPow; }
inline bool IsCompare(BcOp op) {
  return op == BcOp::kCmpLt || op == BcOp::kCmpNe || op == BcOp::kCmpEq;
}

// How the lanes of a value are represented.
enum class Kind : uint8_t {
  kVoid,      // no value
  kPtr,       // Lane::i is the buffer parameter index
  kBool,      // Lane::i is 0 or 1
  kSigned,    // Lane::i, sign-extended from the type's width
  kUnsigned,  // Lane::i, zero-extended (uint64: the bit pattern)
  kFloat,     // Lane::f, exactly representable in the type
};

union Lane {
  int64_t i;
  double f;
};

Kind KindOf(DType t);

struct Inst {
  BcOp op = BcOp::kBarrier;
  DType dtype;
  Kind kind = Kind::kVoid;
  DType src_dtype;  // dtype of src[0] (void when there is none)
  Kind src_kind = Kind::kVoid;
  int id = 0;     // the %id of the text
  int line = 0;   // 1-based line in the text
  int lanes = 0;  // registers used by the result (0 for void)
  int off = 0;    // first register of the result
  std::vector<int> src;      // instruction indices of the sources
  std::vector<int> src_off;  // their first registers
  int64_t iarg = 0;      // DEFINE_GLOBAL index, DEFINE_VAR ordinal, GEP lane
  Lane carg{0};          // CONST value (all lanes)
  bool parallel = false;  // RANGE: split by the launch range
  int jump = -1;  // RANGE -> its ENDRANGE, ENDRANGE -> its RANGE, IF -> its ENDIF
  std::string name;  // DEFINE_VAR name
};

struct Kernel {
  std::string name;
  std::vector<Inst> insts;
  int num_registers = 0;
  int num_vars = 0;        // DEFINE_VAR count
  int64_t num_globals = 0;  // 1 + the largest DEFINE_GLOBAL index (0 if none)
};

// Parses and validates bytecode text. Errors are InvalidArgument and name the
// offending line.
absl::StatusOr<Kernel> Parse(const std::string& text);

// Runs `kernel` with parallel loops restricted to [begin, end). When
// `nbytes` is not null every LOAD / STORE is bounds-checked against it.
absl::Status Execute(const Kernel& kernel, const std::vector<void*>& bufs,
                     const std::vector<size_t>* nbytes, const std::vector<int64_t>& vars,
                     int64_t begin, int64_t end);

// Value semantics shared by the parser (constants) and the executor.
// Rounds `v` to the float type `t` (round to nearest even, single rounding).
double RoundToFloat(double v, ScalarType t);
// Wraps an integer to the width of `t` (bool: != 0).
int64_t WrapInt(uint64_t v, ScalarType t);

}  // namespace kiln::bytecode

#endif  // KILN_ENGINE_RUNTIME_BYTECODE_H_
