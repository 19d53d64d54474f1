// UOp: the immutable, interned node of every kiln graph.
//
// A UOp is (op, dtype, src, arg). UOps are hash-consed: UOp::Make returns the
// same pointer for structurally equal nodes while one is alive, so equality
// of graphs is pointer equality and a graph can be used as a cache key.
// UOps are reference counted (UOpRef = shared_ptr); the intern table only
// holds weak references, so graphs of a long-running server are freed.
// Integer-valued UOps carry value bounds (vmin/vmax), computed at creation,
// which drive the symbolic simplifier.
//
// Thread safety: UOps are immutable; UOp::Make is thread-safe. The intern
// table is the one process-wide structure of the engine: it holds no state a
// caller can observe except pointer identity (see DESIGN.md).
#ifndef KILN_ENGINE_UOP_UOP_H_
#define KILN_ENGINE_UOP_UOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "engine/base/dtype.h"
#include "engine/uop/ops.h"

namespace kiln {

class UOp;
using UOpRef = std::shared_ptr<const UOp>;
using UOpList = std::vector<UOpRef>;

// An argument kiln's IR does not interpret: a ShapeTracker, a device buffer.
// Implementations are immutable; equality decides interning.
class OpaqueArg {
 public:
  virtual ~OpaqueArg() = default;
  virtual size_t Hash() const = 0;
  virtual bool Equals(const OpaqueArg& other) const = 0;
  virtual std::string ToString() const = 0;
};
using OpaqueRef = std::shared_ptr<const OpaqueArg>;

// A constant: integers (and bool) as int64, uint64 by bit pattern; floats as double.
using ConstValue = std::variant<int64_t, double>;

// The arg of a UOp.
struct Arg {
  std::variant<std::monostate, int64_t, double, std::string, std::vector<int64_t>, OpaqueRef> v;

  Arg() = default;
  Arg(int64_t x) : v(x) {}  // NOLINT
  Arg(int x) : v(static_cast<int64_t>(x)) {}  // NOLINT
  Arg(double x) : v(x) {}  // NOLINT
  Arg(std::string s) : v(std::move(s)) {}  // NOLINT
  Arg(const char* s) : v(std::string(s)) {}  // NOLINT
  Arg(std::vector<int64_t> x) : v(std::move(x)) {}  // NOLINT
  Arg(OpaqueRef o) : v(std::move(o)) {}  // NOLINT
  static Arg FromConst(const ConstValue& c);

  bool IsNone() const { return std::holds_alternative<std::monostate>(v); }
  int64_t Int() const;
  double Float() const;
  const std::string& Str() const;
  const std::vector<int64_t>& Ints() const;
  const OpaqueRef& Opaque() const;
  // Typed access to an opaque arg; nullptr when it is not a T.
  template <typename T>
  const T* As() const {
    const auto* o = std::get_if<OpaqueRef>(&v);
    return o ? dynamic_cast<const T*>(o->get()) : nullptr;
  }

  size_t Hash() const;
  bool operator==(const Arg& o) const;
  std::string ToString() const;
};

class UOp : public std::enable_shared_from_this<UOp> {
 public:
  // Returns the interned node.
  static UOpRef Make(Op op, DType dtype, UOpList src = {}, Arg arg = {});
  // Convenience constructors.
  static UOpRef Const(DType dtype, ConstValue v);
  static UOpRef ConstInt(int64_t v, DType dtype = dtypes::kIndex) { return Const(dtype, v); }
  static UOpRef ConstFloat(double v, DType dtype = dtypes::kFloat32) { return Const(dtype, v); }
  // A symbolic integer variable with bounds [min, max].
  static UOpRef Variable(const std::string& name, int64_t min, int64_t max,
                         DType dtype = dtypes::kIndex);
  // `var` (a Variable) bound to `value` (within its bounds; not checked).
  static UOpRef Bind(const UOpRef& var, int64_t value);

  Op op() const { return op_; }
  DType dtype() const { return dtype_; }
  const UOpList& src() const { return src_; }
  const UOpRef& src(size_t i) const { return src_[i]; }
  const Arg& arg() const { return arg_; }
  size_t hash() const { return hash_; }

  // Bounds of the value (integer / bool dtypes; floats get +-inf as +-2^62).
  int64_t vmin() const { return vmin_; }
  int64_t vmax() const { return vmax_; }
  bool IsConst() const { return op_ == Op::kConst; }
  // The constant value; requires IsConst().
  ConstValue const_value() const;
  // True when this is a constant equal to v.
  bool IsConstInt(int64_t v) const;

  UOpRef ref() const { return shared_from_this(); }
  // The same node with other sources / arg / dtype.
  UOpRef Replace(UOpList src) const;
  UOpRef WithArg(Arg arg) const;
  UOpRef WithDType(DType dtype) const;

  // A memo of graph rewrites (pattern.h): bit `b` is set once the graph
  // below this node is known to be a fixpoint of the rule set that owns bit
  // b (SymbolicRules: 0), so a later rewrite returns the node at once. The
  // node's structure decides it, like the hash: no observable state.
  bool IsRewriteFixpoint(int b) const {
    return (fixpoints_.load(std::memory_order_relaxed) >> b) & 1;
  }
  void MarkRewriteFixpoint(int b) const {
    fixpoints_.fetch_or(static_cast<uint8_t>(1u << b), std::memory_order_relaxed);
  }

  // One-line description: "ADD int32 (%a, %b)".
  std::string Describe() const;
  // Multi-line dump of the graph below this node.
  std::string Dump() const;

  ~UOp();
  UOp(const UOp&) = delete;
  UOp& operator=(const UOp&) = delete;

 private:
  UOp(Op op, DType dtype, UOpList src, Arg arg, size_t hash);
  friend struct UOpInternTable;

  const Op op_;
  const DType dtype_;
  UOpList src_;  // not const: destruction moves the sources out (uop.cc)
  const Arg arg_;
  const size_t hash_;
  int64_t vmin_ = 0, vmax_ = 0;
  mutable std::atomic<uint8_t> fixpoints_{0};  // IsRewriteFixpoint's bits
};

// Topological order of the graph below `roots` (sources before users).
std::vector<const UOp*> Toposort(const UOpList& roots);
std::vector<const UOp*> Toposort(const UOpRef& root);

// REDUCE_AXIS args are {reduce op (kAdd, kMax, kMul), axes...}.
Arg ReduceArg(Op op, const std::vector<int64_t>& axes);
Op ReduceOpOf(const UOp& reduce);
std::vector<int64_t> ReduceAxesOf(const UOp& reduce);

// Number of live interned UOps (for tests and leak checks).
size_t LiveUOpCount();

// ---- Builders for expressions (no simplification; see symbolic.h) ----
UOpRef Alu(Op op, UOpList src);  // dtype: comparisons -> bool, else src[0]'s
UOpRef operator+(const UOpRef& a, const UOpRef& b);
UOpRef operator+(const UOpRef& a, int64_t b);
UOpRef operator-(const UOpRef& a, const UOpRef& b);
UOpRef operator-(const UOpRef& a, int64_t b);
UOpRef operator*(const UOpRef& a, const UOpRef& b);
UOpRef operator*(const UOpRef& a, int64_t b);
UOpRef operator/(const UOpRef& a, int64_t b);  // integer division (floor for non-negatives)
UOpRef operator%(const UOpRef& a, int64_t b);
UOpRef operator<(const UOpRef& a, int64_t b);
UOpRef operator<(const UOpRef& a, const UOpRef& b);
UOpRef LogicalAnd(const UOpRef& a, const UOpRef& b);
UOpRef LogicalOr(const UOpRef& a, const UOpRef& b);

}  // namespace kiln

#endif  // KILN_ENGINE_UOP_UOP_H_
