#include "engine/uop/pattern.h"

#include <unordered_map>

#include "engine/base/status.h"

namespace kiln {

UPat UPat::Var(std::string name) {
  UPat p;
  p.name_ = std::move(name);
  return p;
}

UPat UPat::Cvar(std::string name) {
  UPat p;
  p.ops_ = {Op::kConst};
  p.name_ = std::move(name);
  return p;
}

UPat UPat::ConstVal(int64_t v, std::string name) {
  UPat p = Cvar(std::move(name));
  p.const_val_ = v;
  return p;
}

UPat UPat::Alu(Op op, std::vector<UPat> src, std::string name) {
  UPat p;
  p.ops_ = {op};
  p.src_ = std::move(src);
  p.name_ = std::move(name);
  return p;
}

UPat UPat::Ops(std::vector<Op> ops, std::string name) {
  UPat p;
  p.ops_ = std::move(ops);
  p.name_ = std::move(name);
  return p;
}

bool UPat::Match(const UOpRef& u, std::vector<std::pair<std::string, UOpRef>>* b) const {
  if (!ops_.empty()) {
    bool found = false;
    for (Op o : ops_) found |= (o == u->op());
    if (!found) return false;
  }
  if (int_only_ && !(u->dtype().IsInt() || u->dtype().IsBool())) return false;
  if (const_val_ && !u->IsConstInt(*const_val_)) return false;
  const size_t start = b->size();
  if (!name_.empty()) {
    bool bound = false;
    for (const auto& [n, v] : *b) {
      if (n != name_) continue;
      if (v != u) return false;
      bound = true;
    }
    if (!bound) b->emplace_back(name_, u);
  }
  if (!src_) return true;
  if (src_->size() != u->src().size()) {
    b->resize(start);
    return false;
  }
  const size_t mark = b->size();
  bool ok = true;
  for (size_t i = 0; i < src_->size() && ok; ++i) ok = (*src_)[i].Match(u->src(i), b);
  if (ok) return true;
  b->resize(mark);
  if (commutative_ && src_->size() == 2) {
    if ((*src_)[0].Match(u->src(1), b) && (*src_)[1].Match(u->src(0), b)) return true;
  }
  b->resize(start);
  return false;
}

const UOpRef& Match::operator[](const std::string& name) const {
  for (const auto& [n, v] : b_)
    if (n == name) return v;
  KILN_CHECK(false, "pattern has no binding named ", name);
  return root_;
}

PatternMatcher::PatternMatcher(std::vector<Rule> rules, int fixpoint_bit)
    : rules_(std::move(rules)),
      fixpoint_bit_(fixpoint_bit >= 0 && fixpoint_bit < 8 ? fixpoint_bit : -1) {
  by_op_.resize(static_cast<size_t>(Op::kNumOps));
  for (size_t i = 0; i < rules_.size(); ++i) {
    const auto& ops = rules_[i].pat.ops();
    if (ops.empty()) {
      for (auto& v : by_op_) v.push_back(i);
    } else {
      for (Op o : ops) by_op_[static_cast<size_t>(o)].push_back(i);
    }
  }
}

PatternMatcher PatternMatcher::operator+(const PatternMatcher& other) const {
  std::vector<Rule> all = rules_;
  all.insert(all.end(), other.rules_.begin(), other.rules_.end());
  return PatternMatcher(std::move(all));
}

UOpRef PatternMatcher::Rewrite(const UOpRef& u) const {
  std::vector<std::pair<std::string, UOpRef>> b;
  for (size_t i : by_op_[static_cast<size_t>(u->op())]) {
    b.clear();
    if (!rules_[i].pat.Match(u, &b)) continue;
    UOpRef r = rules_[i].fn(Match(u, std::move(b)));
    if (r && r != u) return r;
  }
  return nullptr;
}

namespace {

class Rewriter {
 public:
  explicit Rewriter(const PatternMatcher& pm) : pm_(pm) {}

  UOpRef Run(const UOpRef& u, int depth = 0) {
    if (pm_.fixpoint_bit() >= 0 && u->IsRewriteFixpoint(pm_.fixpoint_bit())) return u;
    auto it = memo_.find(u.get());
    if (it != memo_.end()) return it->second;
    KILN_CHECK(depth < 100000, "graph_rewrite recursion too deep");
    UOpList src;
    src.reserve(u->src().size());
    bool changed = false;
    for (const UOpRef& s : u->src()) {
      src.push_back(Run(s, depth + 1));
      changed |= src.back() != s;
    }
    UOpRef n = changed ? u->Replace(std::move(src)) : u;
    for (int guard = 0;; ++guard) {
      KILN_CHECK(guard < 10000, "graph_rewrite does not converge on ", n->Describe());
      UOpRef r = pm_.Rewrite(n);
      if (!r) break;
      // The replacement's sources may be new: rewrite it fully (Run returns
      // a node rewritten before as its final form).
      n = r->src().empty() ? r : Run(r, depth + 1);
      auto hit = memo_.find(n.get());
      if (hit != memo_.end() && hit->second == n) break;
    }
    // n is final: no rule applies to it or below it.
    if (pm_.fixpoint_bit() >= 0) n->MarkRewriteFixpoint(pm_.fixpoint_bit());
    keep_.push_back(u);
    memo_[u.get()] = n;
    memo_[n.get()] = n;
    keep_.push_back(n);
    return n;
  }

 private:
  const PatternMatcher& pm_;
  std::unordered_map<const UOp*, UOpRef> memo_;
  UOpList keep_;  // keeps memo keys alive so pointers are not reused
};

}  // namespace

UOpRef GraphRewrite(const UOpRef& root, const PatternMatcher& pm) {
  Rewriter r(pm);
  return r.Run(root);
}

UOpRef Substitute(const UOpRef& root, const std::unordered_map<const UOp*, UOpRef>& repl) {
  std::unordered_map<const UOp*, UOpRef> memo;
  for (const UOp* u : Toposort(root)) {
    auto it = repl.find(u);
    if (it != repl.end()) {
      memo[u] = it->second;
      continue;
    }
    UOpList src;
    bool changed = false;
    for (const UOpRef& s : u->src()) {
      src.push_back(memo.at(s.get()));
      changed |= src.back() != s;
    }
    memo[u] = changed ? u->Replace(std::move(src)) : u->ref();
  }
  return memo.at(root.get());
}

}  // namespace kiln
