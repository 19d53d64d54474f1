// Rewrite rules held as data: UPat patterns, a PatternMatcher (a list of
// pattern -> callback rules) and graph_rewrite, which applies a matcher to a
// graph bottom-up until nothing matches (a fixpoint).
//
// Example rule: x + 0 -> x
//   {UPat::Alu(Op::kAdd, {UPat::Var("x"), UPat::ConstVal(0)}).Commutative(),
//    [](const Match& m) { return m["x"]; }}
// Thread safety: PatternMatcher is immutable after construction.
#ifndef KILN_ENGINE_UOP_PATTERN_H_
#define KILN_ENGINE_UOP_PATTERN_H_

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/uop/uop.h"

namespace kiln {

class UPat {
 public:
  // Matches any UOp, binding it to `name` (if not empty).
  static UPat Var(std::string name = "");
  // Matches any constant.
  static UPat Cvar(std::string name = "");
  // Matches a constant equal to v.
  static UPat ConstVal(int64_t v, std::string name = "");
  // Matches `op` with exactly these sources.
  static UPat Alu(Op op, std::vector<UPat> src, std::string name = "");
  // Matches any of `ops`, any sources.
  static UPat Ops(std::vector<Op> ops, std::string name = "");

  // Also try the two sources swapped (binary ops).
  UPat& Commutative() {
    commutative_ = true;
    return *this;
  }
  // Restrict to integer (and bool) dtypes.
  UPat& IntOnly() {
    int_only_ = true;
    return *this;
  }
  UPat& Named(std::string name) {
    name_ = std::move(name);
    return *this;
  }

  const std::vector<Op>& ops() const { return ops_; }

  // Matches u, extending `bindings`; a name bound twice must bind the same UOp.
  bool Match(const UOpRef& u, std::vector<std::pair<std::string, UOpRef>>* bindings) const;

 private:
  std::vector<Op> ops_;  // empty: any op
  std::optional<std::vector<UPat>> src_;
  std::optional<int64_t> const_val_;
  bool commutative_ = false;
  bool int_only_ = false;
  std::string name_;
};

// The bindings of one successful match.
class Match {
 public:
  Match(UOpRef root, std::vector<std::pair<std::string, UOpRef>> b)
      : root_(std::move(root)), b_(std::move(b)) {}
  const UOpRef& root() const { return root_; }
  const UOpRef& operator[](const std::string& name) const;

 private:
  UOpRef root_;
  std::vector<std::pair<std::string, UOpRef>> b_;
};

// A rule's callback returns the replacement, or nullptr to decline.
using RewriteFn = std::function<UOpRef(const Match&)>;

struct Rule {
  UPat pat;
  RewriteFn fn;
  std::string name;  // for debugging
};

class PatternMatcher {
 public:
  // `fixpoint_bit` (0-7, one per rule set; -1: none) lets GraphRewrite mark
  // the nodes it finished (UOp::MarkRewriteFixpoint) and skip them in later
  // rewrites with these same rules.
  explicit PatternMatcher(std::vector<Rule> rules, int fixpoint_bit = -1);
  // Rules of both, this one's first (without a fixpoint bit).
  PatternMatcher operator+(const PatternMatcher& other) const;
  int fixpoint_bit() const { return fixpoint_bit_; }
  // Applies the first matching rule that does not decline; nullptr if none.
  UOpRef Rewrite(const UOpRef& u) const;
  size_t size() const { return rules_.size(); }

 private:
  std::vector<Rule> rules_;
  std::vector<std::vector<size_t>> by_op_;  // op -> rule indices (incl. any-op rules)
  int fixpoint_bit_ = -1;
};

// Rewrites the graph below `root` bottom-up with `pm` until no rule applies.
UOpRef GraphRewrite(const UOpRef& root, const PatternMatcher& pm);

// Replaces nodes by pointer (e.g. a variable by a value), rebuilding users.
UOpRef Substitute(const UOpRef& root,
                  const std::unordered_map<const UOp*, UOpRef>& replacements);

}  // namespace kiln

#endif  // KILN_ENGINE_UOP_PATTERN_H_
