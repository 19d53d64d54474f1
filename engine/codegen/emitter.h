// Emitter (internal to engine/codegen): places the lowerer's UOps into a tree
// of loop scopes and flattens it into a linear program. Each op goes after
// its sources, into the outermost open loop where all of them are defined
// (loop-invariant code is hoisted); accumulators, their assignments, stores
// and whatever reads an accumulator stay in the innermost open loop.
#ifndef KILN_ENGINE_CODEGEN_EMITTER_H_
#define KILN_ENGINE_CODEGEN_EMITTER_H_

#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/uop/uop.h"

namespace kiln {

class Emitter {
 public:
  Emitter();

  // Emits u after its sources, in the outermost open scope where all of them
  // are defined; `pin` (and anything reading an accumulator) stays in the
  // innermost scope. An op emitted before is not emitted again.
  void Emit(const UOpRef& u, bool pin = false);
  // Emits `range` (a RANGE) and opens its loop: later ops may go inside.
  void OpenLoop(const UOpRef& range);
  void CloseLoop() { open_.pop_back(); }

  // The program: every scope's ops in order, each loop closed by an ENDRANGE.
  UOpList Flatten() const;

 private:
  struct Scope;
  struct Item {
    UOpRef u;
    std::unique_ptr<Scope> child;
  };
  struct Scope {
    std::vector<Item> items;
  };

  int Depth() const { return static_cast<int>(open_.size()) - 1; }
  static void FlattenInto(const Scope& s, UOpList* out);

  std::unique_ptr<Scope> root_;
  std::vector<Scope*> open_;
  std::unordered_map<const UOp*, int> depth_;
  std::unordered_set<const UOp*> acc_dep_;
  UOpList keep_;
};

}  // namespace kiln

#endif  // KILN_ENGINE_CODEGEN_EMITTER_H_
