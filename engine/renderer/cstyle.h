// Shared machinery of kiln's C-family renderers: one pass over the linear
// UOps that prints statements and inlines single-use scalar expressions. A
// dialect (a subclass) supplies the spellings that differ: types, kernel
// signature, grid / block indices, math functions, non-finite literals,
// bitcasts and the float16 / bfloat16 helpers. The dialects are OpenCL C and
// CUDA C (GPU kernels, scalar per thread: the GPU heuristics make no vector
// upcasts) and the CPU's C (c_renderer.cc), which also overrides the value
// hooks (Type, Round, Load, Store, Value) for clang's ext_vector_type vectors
// and handles scalars through the base.
//
// Local memory (DEFINE_LOCAL) holds values in their computed type (float for
// float16 / bfloat16), so its loads and stores convert nothing. float16 /
// bfloat16 values are stored as 16-bit patterns and computed in float,
// rounded to their type after every operation, like the interpreter.
//
// GPU kernel ABI: one pointer parameter per DEFINE_GLOBAL (data0, data1,
// ...; a buffer the kernel never stores to is const), then one 64-bit
// integer parameter per DEFINE_VAR, in program order (the CPU dialect
// replaces both through AddBuffer / AddVar).
// Internal to engine/renderer. Not thread-safe (one instance per render).
#ifndef KILN_ENGINE_RENDERER_CSTYLE_H_
#define KILN_ENGINE_RENDERER_CSTYLE_H_

#include <array>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/uop/uop.h"

namespace kiln {

class CStyleRenderer {
 public:
  virtual ~CStyleRenderer() = default;
  std::string Render(const std::string& name, const UOpList& uops);

 protected:
  // What the dialect's kernel wrapper needs to know.
  struct Signature {
    std::string name;
    std::vector<std::string> params;           // rendered parameter declarations
    std::array<int64_t, 3> local = {1, 1, 1};  // block size from the lidx SPECIALs
    bool uses_double = false;
  };

  // ---- dialect hooks: the kernel's interface ----
  // Declares buffer DEFINE_GLOBAL `index` (C type `storage` in memory,
  // never stored to if `read_only`) as "data<index>". The default adds a
  // BufferParam to sig->params, padding unused indices below it.
  virtual void AddBuffer(Signature* sig, std::string* prologue, int64_t index,
                         const std::string& storage, bool read_only);
  // Declares DEFINE_VAR `name` of C type `type`, the `index`-th variable.
  // The default adds a VarParam "var_<name>" and converts it in the prologue.
  virtual void AddVar(Signature* sig, std::string* prologue, const std::string& name,
                      const std::string& type, int index);
  // The bounds of a RANGE loop (by default its two sources).
  virtual std::pair<std::string, std::string> RangeBounds(const UOp& range);

  // ---- dialect hooks: spellings ----
  // Value type of a scalar (float16 / bfloat16 are computed as float).
  virtual std::string ScalarC(ScalarType s) const = 0;
  // Element type in memory: 16-bit floats as unsigned short, bool as a byte.
  virtual std::string StorageC(ScalarType s) const;
  virtual std::string BufferParam(const std::string& storage, const std::string& name,
                                  bool read_only) const = 0;
  virtual std::string VarParam(const std::string& name) const = 0;
  // Grid / block index expression for "gidx<d>" / "lidx<d>".
  virtual std::string Special(const std::string& name) const = 0;
  // Integer literal of a scalar type (without the parentheses for negatives).
  std::string IntLiteral(ScalarType s, int64_t v) const;
  // Suffix of 64-bit integer literals: CUDA "ll" / "ull", OpenCL "L" / "UL".
  virtual std::string Int64Suffix(bool is_unsigned) const = 0;
  // NaN (nan = true) or +infinity.
  virtual std::string NonFinite(bool is_double, bool nan) const = 0;
  // Name of a libm-style function ("exp2", "fma"...) for float or double.
  virtual std::string MathFn(const std::string& fn, bool is_double) const = 0;
  // Reinterprets the bits of scalar value v of C type `from` as C type `to`
  // (16-bit floats arrive as unsigned short patterns).
  virtual std::string Bitcast(const std::string& from, const std::string& to,
                              const std::string& v) const = 0;
  // Definitions of kiln_h2f / kiln_f2h / kiln_rh and kiln_bf2f / kiln_f2bf / kiln_rbf.
  virtual std::string HalfHelpers() const = 0;
  virtual std::string Bf16Helpers() const = 0;
  // The whole kernel text: `helpers` (already collected), then the function.
  virtual std::string Wrap(const Signature& sig, const std::string& helpers,
                           const std::string& prologue, const std::string& body) const = 0;
  // Conversion of value `v` from scalar `from` to `to` (C type `ty`; not
  // bool). The interpreter's semantics: float -> integer truncates and
  // saturates, NaN -> 0 (PTX conversions do this; plain C casts do not).
  virtual std::string Convert(DType from, DType to, const std::string& ty,
                              const std::string& v) const {
    (void)from, (void)to;
    return "((" + ty + ")(" + v + "))";
  }
  // Declaration of a local (shared) memory array and the block barrier.
  virtual std::string LocalArray(const std::string& type, const std::string& name,
                                 int64_t size) const = 0;
  virtual std::string Barrier() const = 0;
  // Name used in messages ("CUDA renderer").
  virtual std::string DialectName() const = 0;
  // The C type of scalar index arithmetic: int32 values computed only from
  // loop counters, variables and constants. "" (the default) keeps int.
  virtual std::string IndexType() const { return ""; }

  // ---- value hooks: the base renders scalars; a vector dialect overrides
  // them and defers its scalar cases here ----
  // The C type of a value (the base accepts scalars only).
  virtual std::string Type(DType t);
  virtual std::string Round(DType t, const std::string& e);
  virtual std::string Load(const UOp& x);
  virtual std::string Store(const UOp& x);
  virtual std::string Value(const UOp& x);

  // For the dialects.
  void Line(std::string* out, const std::string& s);
  const std::string& E(const UOpRef& u);
  std::string Literal(const UOp& c);
  bool half_ = false, bf16_ = false;  // the helpers the kernel needs

 private:
  std::unordered_map<const UOp*, std::string> expr_;
  std::unordered_map<const UOp*, int> uses_;
  // Values declared with IndexType (MarkIndexValues).
  std::unordered_set<const UOp*> index_;
  void MarkIndexValues(const UOpList& uops);
  std::string DeclType(const UOp& x, const std::string& type) const;
  bool double_ = false;
  int indent_ = 1;
  int tmp_ = 0;
};

}  // namespace kiln

#endif  // KILN_ENGINE_RENDERER_CSTYLE_H_
