#include "engine/realize/beam.h"

#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"
#include "engine/codegen/lowerer.h"
#include "engine/realize/engine.h"
#include "engine/runtime/disk_cache.h"

namespace kiln {
namespace {

// The knob settings one change away from `k`.
std::vector<HeuristicKnobs> Neighbors(const HeuristicKnobs& k) {
  std::vector<HeuristicKnobs> out;
  for (int r : {2, 3, 4, 5, 6, 8}) {
    HeuristicKnobs n = k;
    n.reuse_first = r;
    out.push_back(n);
  }
  for (int a : {0, 1, 2}) {
    HeuristicKnobs n = k;
    n.reuse_axes = a;
    out.push_back(n);
  }
  for (int u : {1, 2, 4, 8}) {
    HeuristicKnobs n = k;
    n.unroll = u;
    out.push_back(n);
  }
  HeuristicKnobs v = k;
  v.two_vectors = !k.two_vectors;
  out.push_back(v);
  HeuristicKnobs o = k;
  o.reorder = !k.reorder;
  out.push_back(o);
  return out;
}

struct Variant {
  HeuristicKnobs knobs;
  LinearProgram prog;
  std::string key;     // the source under a fixed name: equal keys, equal kernels
  std::string source;  // under its own name (variants compile together)
};

absl::StatusOr<Variant> Build(const UOpRef& ast, const RendererOptions& ropts,
                              const HeuristicKnobs& knobs, const std::string& name) {
  ASSIGN_OR_RETURN(Kernel k, Kernel::Create(ast, ropts));
  k.HandCodedOptimizations(knobs);
  ASSIGN_OR_RETURN(LinearProgram prog, Lower(k));
  prog.name = name;
  ASSIGN_OR_RETURN(std::string key, RenderKernel("c", "beam", prog.uops));
  ASSIGN_OR_RETURN(std::string src, RenderKernel("c", name, prog.uops));
  return Variant{knobs, std::move(prog), std::move(key), std::move(src)};
}

// Scratch buffers (zeros: no denormals, no NaN slow paths) for timing.
class Scratch {
 public:
  absl::Status Init(Device* device, const std::vector<int64_t>& bytes) {
    for (int64_t n : bytes) {
      ASSIGN_OR_RETURN(BufferRef b, device->NewBuffer(static_cast<size_t>(std::max<int64_t>(n, 64))));
      ASSIGN_OR_RETURN(void* p, b->Ptr());
      std::vector<unsigned char> zeros(b->nbytes(), 0);
      RETURN_IF_ERROR(b->CopyIn(zeros.data(), zeros.size()));
      bufs_.push_back(b);
      ptrs_.push_back(p);
    }
    return absl::OkStatus();
  }
  const std::vector<void*>& ptrs() const { return ptrs_; }

 private:
  std::vector<BufferRef> bufs_;
  std::vector<void*> ptrs_;
};

// The best of several timed runs (after one warm-up), at least ~2 ms of
// runs in all; the minimum is the least noisy estimate on a shared machine.
absl::StatusOr<double> Time(Program* prog, const LinearProgram& p, const Scratch& scratch) {
  LaunchDims dims;
  dims.global = p.global;
  dims.local = p.local;
  // Variables (offsets of views) take their smallest value: in bounds.
  std::vector<int64_t> vars;
  for (const UOpRef& u : p.uops)
    if (u->op() == Op::kDefineVar) vars.push_back(u->vmin());
  RETURN_IF_ERROR(prog->Launch(scratch.ptrs(), vars, dims, true, nullptr));
  double best = 1e30, total = 0;
  for (int i = 0; i < 50 && (i < 3 || total < 2e-3); ++i) {
    double s = 0;
    RETURN_IF_ERROR(prog->Launch(scratch.ptrs(), vars, dims, true, &s));
    best = std::min(best, s);
    total += s;
  }
  return best;
}

}  // namespace

absl::StatusOr<BeamResult> BeamSearch(const UOpRef& ast, const RendererOptions& ropts,
                                      Device* device, const std::vector<int64_t>& param_bytes,
                                      int rounds) {
  ASSIGN_OR_RETURN(Variant base, Build(ast, ropts, HeuristicKnobs{}, "beam_base"));
  static DiskCache* cache = new DiskCache(Env().cache_dir + "/beam", "beam");
  const std::string key = absl::StrCat(device->name(), "\nrounds ", rounds, "\n", base.key);
  BeamResult result;
  if (std::optional<std::string> hit = cache->Get(key)) {
    if (std::optional<HeuristicKnobs> k = HeuristicKnobs::Parse(*hit)) {
      result.knobs = *k;
      result.cached = true;
      return result;
    }
  }
  Scratch scratch;
  RETURN_IF_ERROR(scratch.Init(device, param_bytes));
  // Compiled variants by key; every round times the current best and its
  // neighbours in three interleaved passes and keeps each one's minimum, so
  // a noisy moment of the shared machine hits them all alike.
  std::map<std::string, std::pair<std::unique_ptr<Program>, LinearProgram>> progs;
  auto round_best = [&](const std::vector<Variant>& vs, std::vector<double>* secs) -> absl::Status {
    std::vector<const Variant*> todo;
    std::vector<std::string> sources;
    for (const Variant& v : vs) {
      if (progs.count(v.key) ||
          std::any_of(todo.begin(), todo.end(), [&](const Variant* t) { return t->key == v.key; }))
        continue;
      todo.push_back(&v);
      sources.push_back(v.source);
    }
    if (!todo.empty()) {
      ASSIGN_OR_RETURN(std::vector<std::string> bins, device->compiler().CompileMany(sources));
      for (size_t i = 0; i < todo.size(); ++i) {
        ASSIGN_OR_RETURN(std::unique_ptr<Program> prog,
                         device->LoadProgram(todo[i]->prog.name, bins[i]));
        progs[todo[i]->key] = {std::move(prog), todo[i]->prog};
      }
    }
    secs->assign(vs.size(), 1e30);
    for (int pass = 0; pass < 3; ++pass)
      for (size_t i = 0; i < vs.size(); ++i) {
        auto& [prog, lp] = progs.at(vs[i].key);
        ASSIGN_OR_RETURN(double t, Time(prog.get(), lp, scratch));
        (*secs)[i] = std::min((*secs)[i], t);
      }
    return absl::OkStatus();
  };
  Variant best = base;
  double best_s = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<Variant> vs = {best};
    int n = 0;
    for (const HeuristicKnobs& k : Neighbors(best.knobs)) {
      ASSIGN_OR_RETURN(Variant v, Build(ast, ropts, k, absl::StrCat("beam_v", round, "_", n++)));
      vs.push_back(std::move(v));
    }
    std::vector<double> secs;
    RETURN_IF_ERROR(round_best(vs, &secs));
    if (round == 0) result.default_seconds = secs[0];
    best_s = secs[0];
    size_t pick = 0;
    for (size_t i = 1; i < vs.size(); ++i)
      if (secs[i] < best_s * 0.97) best_s = secs[i], pick = i;
    if (pick == 0) break;
    best = vs[pick];
  }
  result.variants = static_cast<int>(progs.size());
  result.knobs = best.knobs;
  result.best_seconds = best_s;
  cache->Put(key, result.knobs.ToString());
  return result;
}

}  // namespace kiln
