#include "engine/uop/uop.h"

#include <algorithm>
#include <cstring>
#include <array>
#include <limits>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"

namespace kiln {
namespace {

constexpr int64_t kBig = int64_t{1} << 62;

size_t Mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

int64_t Clamp(__int128 v) {
  if (v > kBig) return kBig;
  if (v < -kBig) return -kBig;
  return static_cast<int64_t>(v);
}

bool BoundedType(DType t) { return (t.IsInt() || t.IsBool()) && t.count == 1 && !t.ptr; }

}  // namespace

// ---------------- Arg ----------------

Arg Arg::FromConst(const ConstValue& c) {
  if (const auto* i = std::get_if<int64_t>(&c)) return Arg(*i);
  return Arg(std::get<double>(c));
}

int64_t Arg::Int() const {
  KILN_CHECK(std::holds_alternative<int64_t>(v), "arg is not an int: ", ToString());
  return std::get<int64_t>(v);
}
double Arg::Float() const {
  KILN_CHECK(std::holds_alternative<double>(v), "arg is not a float: ", ToString());
  return std::get<double>(v);
}
const std::string& Arg::Str() const {
  KILN_CHECK(std::holds_alternative<std::string>(v), "arg is not a string: ", ToString());
  return std::get<std::string>(v);
}
const std::vector<int64_t>& Arg::Ints() const {
  KILN_CHECK(std::holds_alternative<std::vector<int64_t>>(v), "arg is not ints: ", ToString());
  return std::get<std::vector<int64_t>>(v);
}
const OpaqueRef& Arg::Opaque() const {
  KILN_CHECK(std::holds_alternative<OpaqueRef>(v), "arg is not opaque: ", ToString());
  return std::get<OpaqueRef>(v);
}

size_t Arg::Hash() const {
  size_t h = v.index();
  switch (v.index()) {
    case 1: return Mix(h, std::hash<int64_t>()(std::get<int64_t>(v)));
    case 2: {
      double d = std::get<double>(v);
      int64_t bits;
      std::memcpy(&bits, &d, 8);
      return Mix(h, std::hash<int64_t>()(bits));
    }
    case 3: return Mix(h, std::hash<std::string>()(std::get<std::string>(v)));
    case 4:
      for (int64_t x : std::get<std::vector<int64_t>>(v)) h = Mix(h, std::hash<int64_t>()(x));
      return h;
    case 5: return Mix(h, std::get<OpaqueRef>(v)->Hash());
    default: return h;
  }
}

bool Arg::operator==(const Arg& o) const {
  if (v.index() != o.v.index()) return false;
  if (v.index() == 2) {  // bitwise equality: NaN == NaN, -0 != +0
    double a = std::get<double>(v), b = std::get<double>(o.v);
    return std::memcmp(&a, &b, 8) == 0;
  }
  if (v.index() == 5) {
    const OpaqueRef& a = std::get<OpaqueRef>(v);
    const OpaqueRef& b = std::get<OpaqueRef>(o.v);
    return a == b || a->Equals(*b);
  }
  return v == o.v;
}

std::string Arg::ToString() const {
  switch (v.index()) {
    case 1: return std::to_string(std::get<int64_t>(v));
    case 2: {
      std::ostringstream s;
      s.precision(17);
      s << std::get<double>(v);
      return s.str();
    }
    case 3: return "\"" + std::get<std::string>(v) + "\"";
    case 4: return "(" + absl::StrJoin(std::get<std::vector<int64_t>>(v), ",") + ")";
    case 5: return std::get<OpaqueRef>(v)->ToString();
    default: return "";
  }
}

// ---------------- intern table ----------------

struct UOpKey {
  Op op;
  DType dtype;
  const UOpList* src;
  const Arg* arg;
  size_t hash;
};

// A multiset of nodes by hash: open addressing with linear probing, so a
// lookup reads consecutive slots of one array (the hash beside each pointer)
// instead of chasing a list node per entry, and still visits every node
// stored under its hash (two can match: a dying node and its replacement).
// Interning is most of the cost of building index expressions: with
// std::unordered_multimap its lookups were a fifth of a model's kernel
// preparation, mostly cache misses.
class NodeTable {
 public:
  // The first node stored under hash h for which `take` returns true, or
  // null.
  template <typename F>
  UOp* Find(size_t h, F&& take) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = Start(h);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.u == nullptr) return nullptr;
      if (s.u != Tomb() && s.hash == h && take(s.u)) return s.u;
    }
  }
  void Insert(size_t h, UOp* u) {
    if ((size_ + tombs_ + 1) * 10 > slots_.size() * 7) Rebuild();
    for (size_t i = Start(h);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.u == nullptr || s.u == Tomb()) {
        if (s.u == Tomb()) --tombs_;
        s = {h, u};
        ++size_;
        return;
      }
    }
  }
  void Erase(size_t h, const UOp* u) {
    if (slots_.empty()) return;
    for (size_t i = Start(h);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.u == nullptr) return;
      if (s.u == u) {
        s.u = Tomb();
        --size_;
        ++tombs_;
        return;
      }
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    size_t hash = 0;
    UOp* u = nullptr;  // null: never used; Tomb(): erased
  };
  static UOp* Tomb() { return reinterpret_cast<UOp*>(alignof(UOp)); }
  // The hash's bits spread (the node hashes combine with a weak mix).
  size_t Start(size_t h) const {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h & mask_;
  }
  // Rehashes the live nodes into a table at most half full.
  void Rebuild() {
    size_t cap = 64;
    while (cap < (size_ + 1) * 2) cap *= 2;
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    size_ = tombs_ = 0;
    for (const Slot& s : old)
      if (s.u != nullptr && s.u != Tomb()) Insert(s.hash, s.u);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0, size_ = 0, tombs_ = 0;
};

struct UOpInternTable {
  static constexpr int kShards = 16;
  struct Shard {
    std::mutex mu;
    NodeTable nodes;
  };
  std::array<Shard, kShards> shards;

  static bool Matches(const UOp* u, const UOpKey& k) {
    if (u->op_ != k.op || u->dtype_ != k.dtype || u->src_.size() != k.src->size()) return false;
    for (size_t i = 0; i < u->src_.size(); ++i)
      if (u->src_[i].get() != (*k.src)[i].get()) return false;
    return u->arg_ == *k.arg;
  }

  UOpRef Get(Op op, DType dtype, UOpList src, Arg arg);
  void Remove(UOp* u);
  static void Destroy(UOp* u);
  size_t Size() {
    size_t n = 0;
    for (auto& s : shards) {
      std::lock_guard<std::mutex> l(s.mu);
      n += s.nodes.size();
    }
    return n;
  }
};

UOpInternTable& Table() {
  // Intentionally leaked: UOps may be freed during static destruction.
  static UOpInternTable* table = new UOpInternTable();
  return *table;
}

void UOpInternTable::Remove(UOp* u) {
  Shard& s = shards[u->hash_ % kShards];
  std::lock_guard<std::mutex> l(s.mu);
  s.nodes.Erase(u->hash_, u);
}

// The deleter of every UOp. Releasing a node's sources may free them in
// turn; done recursively, a long chain (an unrolled recurrence of 10^5 ops)
// would overflow the stack. The outermost call drains a worklist instead,
// and nested calls hand their sources to it.
void UOpInternTable::Destroy(UOp* u) {
  thread_local std::vector<UOpRef>* pending = nullptr;
  Table().Remove(u);
  UOpList srcs = std::move(u->src_);
  delete u;
  if (pending != nullptr) {
    for (UOpRef& s : srcs) pending->push_back(std::move(s));
    return;
  }
  std::vector<UOpRef> work = std::move(srcs);
  pending = &work;
  while (!work.empty()) {
    UOpRef r = std::move(work.back());
    work.pop_back();
    r.reset();  // may free a node, whose sources land in `work`
  }
  pending = nullptr;
}

UOpRef UOpInternTable::Get(Op op, DType dtype, UOpList src, Arg arg) {
  size_t h = Mix(static_cast<size_t>(op), dtype.Hash());
  for (const UOpRef& s : src) h = Mix(h, std::hash<const void*>()(s.get()));
  h = Mix(h, arg.Hash());
  UOpKey key{op, dtype, &src, &arg, h};
  Shard& s = shards[h % kShards];
  // Nothing is destroyed inside the critical section (a destructor would
  // re-enter Remove), so `src` and `arg` stay alive until after it.
  std::lock_guard<std::mutex> l(s.mu);
  UOpRef live;
  s.nodes.Find(h, [&](UOp* u) {
    if (!Matches(u, key)) return false;
    // Empty if that node is being destroyed right now: then make a new one.
    live = u->weak_from_this().lock();
    return live != nullptr;
  });
  if (live) return live;
  UOp* raw = new UOp(op, dtype, src, arg, h);
  UOpRef ref(raw, &Destroy);
  s.nodes.Insert(h, raw);
  return ref;
}

size_t LiveUOpCount() { return Table().Size(); }

Arg ReduceArg(Op op, const std::vector<int64_t>& axes) {
  std::vector<int64_t> a = {static_cast<int64_t>(op)};
  a.insert(a.end(), axes.begin(), axes.end());
  return Arg(a);
}
Op ReduceOpOf(const UOp& r) { return static_cast<Op>(r.arg().Ints()[0]); }
std::vector<int64_t> ReduceAxesOf(const UOp& r) {
  const auto& a = r.arg().Ints();
  return std::vector<int64_t>(a.begin() + 1, a.end());
}

// ---------------- UOp ----------------

UOp::UOp(Op op, DType dtype, UOpList src, Arg arg, size_t hash)
    : op_(op), dtype_(dtype), src_(std::move(src)), arg_(std::move(arg)), hash_(hash) {
  vmin_ = -kBig;
  vmax_ = kBig;
  if (!BoundedType(dtype_)) return;
  vmin_ = static_cast<int64_t>(std::max<double>(DTypeMin(dtype_), -static_cast<double>(kBig)));
  vmax_ = static_cast<int64_t>(std::min<double>(DTypeMax(dtype_), static_cast<double>(kBig)));
  auto s = [&](size_t i) { return src_[i].get(); };
  auto set = [&](__int128 lo, __int128 hi) {
    vmin_ = std::max(vmin_, Clamp(lo));
    vmax_ = std::min(vmax_, Clamp(hi));
  };
  switch (op_) {
    case Op::kConst:
      // A value outside the type (uint8's -1, meaning 255, as a bitwise NOT
      // builds it) keeps the type's bounds: [-1, -1] clamped to [0, 255]
      // would claim a select between it and 0 is always 0.
      if (const auto* i = std::get_if<int64_t>(&arg_.v); i && *i >= vmin_ && *i <= vmax_) {
        vmin_ = vmax_ = *i;
      }
      break;
    case Op::kDefineVar:  // src = {min, max}
      if (src_.size() == 2) set(s(0)->vmin_, s(1)->vmax_);
      break;
    case Op::kBind:  // the variable's bounds, not the value: folding stays value-free
      set(s(0)->vmin_, s(0)->vmax_);
      break;
    case Op::kRange:
      set(s(0)->vmin_, static_cast<__int128>(s(1)->vmax_) - 1);
      break;
    case Op::kSpecial:
      set(0, static_cast<__int128>(s(0)->vmax_) - 1);
      break;
    case Op::kAdd:
      set(static_cast<__int128>(s(0)->vmin_) + s(1)->vmin_,
          static_cast<__int128>(s(0)->vmax_) + s(1)->vmax_);
      break;
    case Op::kSub:
      set(static_cast<__int128>(s(0)->vmin_) - s(1)->vmax_,
          static_cast<__int128>(s(0)->vmax_) - s(1)->vmin_);
      break;
    case Op::kNeg:
      set(-static_cast<__int128>(s(0)->vmax_), -static_cast<__int128>(s(0)->vmin_));
      break;
    case Op::kMul: {
      __int128 c[4] = {static_cast<__int128>(s(0)->vmin_) * s(1)->vmin_,
                       static_cast<__int128>(s(0)->vmin_) * s(1)->vmax_,
                       static_cast<__int128>(s(0)->vmax_) * s(1)->vmin_,
                       static_cast<__int128>(s(0)->vmax_) * s(1)->vmax_};
      set(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
      break;
    }
    case Op::kIDiv:
      if (s(1)->IsConst() && s(1)->vmin_ > 0) {
        int64_t d = s(1)->vmin_;
        set(s(0)->vmin_ / d, s(0)->vmax_ / d);  // truncation is monotonic
      }
      break;
    case Op::kMod:
      if (s(1)->IsConst() && s(1)->vmin_ > 0) {
        int64_t d = s(1)->vmin_;
        if (s(0)->vmin_ >= 0) {
          if (s(0)->vmax_ < d) set(s(0)->vmin_, s(0)->vmax_);
          else set(0, d - 1);
        } else {
          set(-(d - 1), d - 1);
        }
      }
      break;
    case Op::kMax:
      set(std::max(s(0)->vmin_, s(1)->vmin_), std::max(s(0)->vmax_, s(1)->vmax_));
      break;
    case Op::kCmpLt:
      if (s(0)->vmax_ < s(1)->vmin_) set(1, 1);
      else if (s(0)->vmin_ >= s(1)->vmax_) set(0, 0);
      else set(0, 1);
      break;
    case Op::kCmpNe:
    case Op::kCmpEq: {
      bool disjoint = s(0)->vmax_ < s(1)->vmin_ || s(0)->vmin_ > s(1)->vmax_;
      bool same = s(0)->vmin_ == s(0)->vmax_ && s(1)->vmin_ == s(1)->vmax_ &&
                  s(0)->vmin_ == s(1)->vmin_;
      int64_t ne_lo = disjoint ? 1 : 0, ne_hi = same ? 0 : 1;
      if (op_ == Op::kCmpNe) set(ne_lo, ne_hi);
      else set(1 - ne_hi, 1 - ne_lo);
      break;
    }
    case Op::kAnd:
      if (dtype_.IsBool()) set(s(0)->vmin_ & s(1)->vmin_, s(0)->vmax_ & s(1)->vmax_);
      else if (s(0)->vmin_ >= 0 && s(1)->vmin_ >= 0) set(0, std::min(s(0)->vmax_, s(1)->vmax_));
      break;
    case Op::kOr:
      if (dtype_.IsBool()) set(s(0)->vmin_ | s(1)->vmin_, s(0)->vmax_ | s(1)->vmax_);
      break;
    case Op::kWhere:
      set(std::min(s(1)->vmin_, s(2)->vmin_), std::max(s(1)->vmax_, s(2)->vmax_));
      if (s(0)->vmin_ == 1) set(s(1)->vmin_, s(1)->vmax_);
      break;
    case Op::kCast:
      if (BoundedType(s(0)->dtype_)) set(s(0)->vmin_, s(0)->vmax_);
      break;
    default:
      break;
  }
  if (vmin_ > vmax_) vmax_ = vmin_;  // contradictory bounds (unreachable code)
}

UOp::~UOp() = default;

UOpRef UOp::Make(Op op, DType dtype, UOpList src, Arg arg) {
  return Table().Get(op, dtype, std::move(src), std::move(arg));
}

UOpRef UOp::Const(DType dtype, ConstValue v) {
  if (dtype.IsFloat()) {
    if (const auto* i = std::get_if<int64_t>(&v)) v = static_cast<double>(*i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    v = dtype.IsBool() ? static_cast<int64_t>(*d != 0) : static_cast<int64_t>(*d);
  }
  if (dtype.IsBool()) v = static_cast<int64_t>(std::get<int64_t>(v) != 0);
  return Make(Op::kConst, dtype, {}, Arg::FromConst(v));
}

UOpRef UOp::Variable(const std::string& name, int64_t min, int64_t max, DType dtype) {
  return Make(Op::kDefineVar, dtype, {ConstInt(min, dtype), ConstInt(max, dtype)}, Arg(name));
}

UOpRef UOp::Bind(const UOpRef& var, int64_t value) {
  return Make(Op::kBind, var->dtype(), {var, ConstInt(value, var->dtype())});
}

ConstValue UOp::const_value() const {
  KILN_CHECK(op_ == Op::kConst, "not a constant: ", Describe());
  if (const auto* i = std::get_if<int64_t>(&arg_.v)) return *i;
  return std::get<double>(arg_.v);
}

bool UOp::IsConstInt(int64_t v) const {
  if (op_ != Op::kConst) return false;
  if (const auto* i = std::get_if<int64_t>(&arg_.v)) return *i == v;
  return std::get<double>(arg_.v) == static_cast<double>(v);
}

UOpRef UOp::Replace(UOpList src) const { return Make(op_, dtype_, std::move(src), arg_); }
UOpRef UOp::WithArg(Arg arg) const { return Make(op_, dtype_, src_, std::move(arg)); }
UOpRef UOp::WithDType(DType dtype) const { return Make(op_, dtype, src_, arg_); }

std::string UOp::Describe() const {
  std::string s = absl::StrCat(OpName(op_), " ", dtype_.Name());
  if (!arg_.IsNone()) absl::StrAppend(&s, " arg=", arg_.ToString());
  return s;
}

std::string UOp::Dump() const {
  std::vector<const UOp*> order = Toposort(ref());
  std::unordered_map<const UOp*, size_t> id;
  std::string out;
  for (const UOp* u : order) {
    id[u] = id.size();
    std::vector<std::string> srcs;
    for (const UOpRef& s : u->src_) srcs.push_back(absl::StrCat("%", id[s.get()]));
    absl::StrAppend(&out, "%", id[u], " = ", u->Describe(), " (", absl::StrJoin(srcs, ", "),
                    ")\n");
  }
  return out;
}

std::vector<const UOp*> Toposort(const UOpList& roots) {
  std::vector<const UOp*> order;
  std::unordered_set<const UOp*> seen;
  // Iterative DFS so deep graphs cannot overflow the stack.
  std::vector<std::pair<const UOp*, size_t>> stack;
  for (const UOpRef& r : roots) {
    if (!r || seen.count(r.get())) continue;
    stack.push_back({r.get(), 0});
    seen.insert(r.get());
    while (!stack.empty()) {
      auto& [u, i] = stack.back();
      if (i < u->src().size()) {
        const UOp* s = u->src()[i++].get();
        if (seen.insert(s).second) stack.push_back({s, 0});
      } else {
        order.push_back(u);
        stack.pop_back();
      }
    }
  }
  return order;
}

std::vector<const UOp*> Toposort(const UOpRef& root) { return Toposort(UOpList{root}); }

// ---------------- expression builders ----------------

UOpRef Alu(Op op, UOpList src) {
  KILN_CHECK(!src.empty());
  DType dt = IsComparison(op) ? dtypes::kBool.Vec(src[0]->dtype().count) : src[0]->dtype();
  if (op == Op::kWhere) dt = src[1]->dtype();
  return UOp::Make(op, dt, std::move(src));
}

UOpRef operator+(const UOpRef& a, const UOpRef& b) { return Alu(Op::kAdd, {a, b}); }
UOpRef operator+(const UOpRef& a, int64_t b) { return a + UOp::ConstInt(b, a->dtype()); }
UOpRef operator-(const UOpRef& a, const UOpRef& b) { return Alu(Op::kSub, {a, b}); }
UOpRef operator-(const UOpRef& a, int64_t b) { return a - UOp::ConstInt(b, a->dtype()); }
UOpRef operator*(const UOpRef& a, const UOpRef& b) { return Alu(Op::kMul, {a, b}); }
UOpRef operator*(const UOpRef& a, int64_t b) { return a * UOp::ConstInt(b, a->dtype()); }
UOpRef operator/(const UOpRef& a, int64_t b) {
  return Alu(Op::kIDiv, {a, UOp::ConstInt(b, a->dtype())});
}
UOpRef operator%(const UOpRef& a, int64_t b) {
  return Alu(Op::kMod, {a, UOp::ConstInt(b, a->dtype())});
}
UOpRef operator<(const UOpRef& a, int64_t b) {
  return Alu(Op::kCmpLt, {a, UOp::ConstInt(b, a->dtype())});
}
UOpRef operator<(const UOpRef& a, const UOpRef& b) { return Alu(Op::kCmpLt, {a, b}); }
UOpRef LogicalAnd(const UOpRef& a, const UOpRef& b) { return Alu(Op::kAnd, {a, b}); }
UOpRef LogicalOr(const UOpRef& a, const UOpRef& b) { return Alu(Op::kOr, {a, b}); }

}  // namespace kiln
