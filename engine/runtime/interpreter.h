// The "INTERP" device: executes kernels written in kiln's textual bytecode
// (the linear kernel IR, one instruction per line). It is the engine's test
// oracle, the living definition of the ops: simple, exact and independent of
// the C backend. Single-threaded per launch.
//
// Format (blank lines and lines starting with '#' are ignored):
//   kernel <name>
//   %<id> = <OP> <dtype> (<src ids, comma separated>) [<arg>]
//   ...
//   end
// dtypes: bool, int8..int64, uint8..uint64, float16, bfloat16, float32,
// float64, void; vectors append x<N> (float32x4), pointers append '*'.
//
// Semantics (values are scalars or vectors; ALU ops work lane-wise and need
// operands of exactly the result's type, comparisons yield bool):
//   DEFINE_GLOBAL T* () i       buffer parameter i
//   DEFINE_VAR T (%min,%max) n  vars[k], k = ordinal of this DEFINE_VAR;
//                               a value outside [min, max] is InvalidArgument
//   CONST T () v                bool 0/1, integer text, %.17g / inf / nan
//   RANGE T (%s,%e) id [parallel]   loop over [s, e); a parallel loop is
//                               intersected with the launch range
//                               [0, dims.global[0]); empty loops are skipped
//   ENDRANGE void (%range)      next iteration
//   DEFINE_ACC T (%init, ...)   accumulator, set to init when executed
//   ASSIGN T (%acc, %v)         acc = v (the ASSIGN's value is v too)
//   LOAD T (%buf,%idx[,%gate,%alt])  N consecutive elements for a Tx<N>;
//                               a false gate yields alt and reads nothing
//   STORE void (%buf,%idx,%v[,%gate])
//   VECTORIZE Tx<N> (...), GEP T (%vec) lane, CAST, BITCAST
//   IF void (%cond) ... ENDIF void (%if), BARRIER void ()
//   NEG EXP2 LOG2 SIN SQRT RECIP TRUNC | ADD SUB MUL FDIV IDIV MOD MAX CMPLT
//   CMPNE CMPEQ AND OR XOR SHL SHR POW | WHERE MULACC
// Arithmetic follows the dtype: float results are computed in double and
// rounded once to the result type (float16 / bfloat16 too, round to nearest
// even); MULACC of floats is a fused multiply-add, rounded once (the
// renderers print fma()); integers wrap to their width; IDIV truncates and
// MOD takes the dividend's sign, both giving 0 for a zero divisor; MAX is
// (a > b ? a : b); SHR is arithmetic for signed and logical for unsigned
// types; shift counts outside [0, bits) give 0 (or -1 for SHR of a negative);
// float -> int casts truncate and saturate (NaN -> 0); casts between integer
// types wrap; NEG of a bool is logical not; bool ADD / MUL act as OR / AND.
#ifndef KILN_ENGINE_RUNTIME_INTERPRETER_H_
#define KILN_ENGINE_RUNTIME_INTERPRETER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/runtime/cpu_device.h"
#include "engine/runtime/device.h"

namespace kiln {

// Parses and validates bytecode; the binary is the text itself. Errors are
// InvalidArgument naming the line. Thread-safe (stateless).
class BytecodeCompiler : public Compiler {
 public:
  absl::StatusOr<std::string> Compile(const std::string& source) override;
};

// The interpreter device. Programs are independent of the device object
// (they own their parsed kernel) and may be launched concurrently.
// Thread-safe.
class InterpreterDevice : public Device {
 public:
  InterpreterDevice() : Device("INTERP") {}

  std::string renderer() const override { return "bytecode"; }
  Allocator& allocator() override { return allocator_; }
  Compiler& compiler() override { return compiler_; }
  // Parses `binary`; its kernel name must be `function`. The program's
  // Launch runs unchecked; LaunchChecked bounds-checks every LOAD / STORE.
  absl::StatusOr<std::unique_ptr<Program>> LoadProgram(const std::string& function,
                                                       const std::string& binary) override;

 private:
  HostAllocator allocator_;
  BytecodeCompiler compiler_;
};

}  // namespace kiln

#endif  // KILN_ENGINE_RUNTIME_INTERPRETER_H_
