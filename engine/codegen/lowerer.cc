#include "engine/codegen/lowerer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <memory>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/base/flags.h"
#include "engine/codegen/emitter.h"
#include "engine/codegen/float_rules.h"
#include "engine/codegen/lanes.h"
#include "engine/codegen/lowerer_local.h"
#include "engine/uop/symbolic.h"

namespace kiln {
namespace {

UOpRef Identity(Op op, DType dt) {
  switch (op) {
    case Op::kAdd: return ConstOf(dt, 0);
    case Op::kMul: return ConstOf(dt, 1);
    case Op::kMax:
      if (dt.IsFloat()) return UOp::Const(dt.Scalar(), -std::numeric_limits<double>::infinity());
      return UOp::Const(dt.Scalar(), static_cast<int64_t>(DTypeMin(dt)));
    default: KILN_CHECK(false, "no identity for reduce op ", OpName(op));
  }
  return nullptr;
}

// ---------------- the lowerer ----------------

class Lowerer {
 public:
  explicit Lowerer(const Kernel& k) : k_(k) {}

  struct Step {
    const char* name;
    absl::Status (Lowerer::*run)(LinearProgram* p);
  };

  absl::StatusOr<LinearProgram> Run() {
    // Lowering runs these steps in order, the body's once per segment of the
    // parallel axis (see Segments: each copy lowers its indices and gates
    // over its own range). With DEBUG>=5 the program so far is listed after
    // each; the last step checks the result (CheckLinearProgram).
    static constexpr Step kPrologue[] = {{"axes", &Lowerer::ClassifyAxes}};
    static constexpr Step kBody[] = {{"global loops", &Lowerer::OpenGlobalLoops},
                                     {"reduce", &Lowerer::LowerReduce},
                                     {"stores", &Lowerer::LowerStores}};
    static constexpr Step kEpilogue[] = {{"flatten", &Lowerer::FlattenProgram},
                                         {"parameters", &Lowerer::OrderParameters},
                                         {"check", &Lowerer::Check}};
    LinearProgram p;
    const bool dump = Env().debug >= 5;
    auto run = [&](const auto& steps) -> absl::Status {
      for (const Step& step : steps) {
        RETURN_IF_ERROR((this->*step.run)(&p));
        if (!dump) continue;
        LinearProgram so_far = p;
        if (so_far.uops.empty()) so_far.uops = em_.Flatten();
        std::fprintf(stderr, "lower %s after %s:\n%s", p.name.c_str(), step.name,
                     ListProgram(so_far).c_str());
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(run(kPrologue));
    const std::vector<int64_t> cuts = Segments();
    for (size_t seg = 0; seg + 1 < cuts.size(); ++seg) {
      segment_ = {cuts[seg], cuts[seg + 1]};
      memo_.clear();
      reduce_result_.clear();
      open_loops_ = 0;
      RETURN_IF_ERROR(run(kBody));
    }
    RETURN_IF_ERROR(run(kEpilogue));
    return p;
  }

 private:
  // The axes' roles: global or reduce upcasts, the vector axis and width.
  absl::Status ClassifyAxes(LinearProgram* p) {
    const int n = k_.ndim();
    vx_ = k_.vector_axis();
    w_ = k_.vector_width();
    lane_ = UOp::Variable("lane", 0, std::max<int64_t>(w_ - 1, 0));
    lanes_ = Lanes(lane_);
    idx_.assign(n, nullptr);
    for (int a = k_.first_upcast(); a < n; ++a) {
      if (a == vx_) continue;
      (k_.IsReduceAxis(a) ? r_axes_ : g_axes_).push_back(a);
    }
    w_post_ = vec_is_reduce() ? 1 : w_;
    p->name = k_.Name();
    for (const Opt& o : k_.applied()) p->opts.push_back(o.ToString());
    stager_ = LocalStager::Create(k_);  // GPU operands staged in local memory, or nullptr
    if (stager_) p->opts.push_back(stager_->Describe());
    return absl::OkStatus();
  }

  // The bounds of the segments the parallel axis is lowered in: [0, size)
  // alone, or on CPUs its parts (Kernel::PartCuts: a concatenation's parts,
  // each a masked load that every element would evaluate), so each segment
  // sees only its parts' loads and the others fold away. At most 64 segments
  // of an elementwise body, 8 of a reduce (each is a copy of the body).
  std::vector<int64_t> Segments() const {
    const int a0 = k_.ParallelAxis();
    if (a0 < 0) return {0, 1};
    std::vector<int64_t> cuts = {0};
    if (!k_.options().gpu) {
      std::vector<int64_t> parts = k_.PartCuts(a0);
      if (parts.size() < (k_.reduce() ? 8u : 64u)) cuts.insert(cuts.end(), parts.begin(), parts.end());
    }
    cuts.push_back(k_.full_shape()[a0]);
    return cuts;
  }

  // Global loops; the parallel one (Kernel::ParallelAxis) runs over the
  // thread's slice. On GPUs global and local axes are grid / block indices
  // instead.
  absl::Status OpenGlobalLoops(LinearProgram* p) {
    if (k_.options().gpu) {
      RETURN_IF_ERROR(MapSpecials(0, k_.first_local(), "gidx", {int64_t{2147483647}, 65535, 65535},
                                  &p->global));
      // Block dims: local axes, then the group axis (a reduce axis).
      RETURN_IF_ERROR(MapSpecials(k_.first_local(), k_.first_reduce() + k_.group_dims(), "lidx",
                                  {1024, 1024, 64}, &p->local));
      return absl::OkStatus();
    }
    const int parallel_axis = k_.ParallelAxis();
    for (int a = 0; a < k_.first_reduce(); ++a) {
      int64_t s = k_.full_shape()[a];
      if (s == 1) {
        idx_[a] = UOp::ConstInt(0);
        continue;
      }
      const bool parallel = a == parallel_axis;
      // The parallel loop covers the current segment (kParallelSegment:
      // clamped to the threads' slice when rendered).
      const int64_t lo = parallel ? segment_.first : 0, hi = parallel ? segment_.second : s;
      const int64_t kind = !parallel ? 0 : lo > 0 || hi < s ? kParallelSegment : 1;
      UOpRef r = UOp::Make(Op::kRange, dtypes::kIndex, {UOp::ConstInt(lo), UOp::ConstInt(hi)},
                           Arg(std::vector<int64_t>{range_id_++, kind}));
      if (parallel) p->global[0] = s;
      idx_[a] = r;
      em_.OpenLoop(r);
      ++open_loops_;
    }
    return absl::OkStatus();
  }

  // The reduce: accumulators, the reduce loops (with local-memory staging),
  // the accumulation, the horizontal reduce of vector lanes and the combine
  // of a GPU group.
  absl::Status LowerReduce(LinearProgram* /*p*/) {
    const UOp* red = k_.reduce();
    if (red == nullptr) return absl::OkStatus();
    Op rop = ReduceOpOf(*red);
    DType dt = red->dtype();
    std::vector<std::map<int, int64_t>> gcombos = Combos(g_axes_);
    std::vector<std::map<int, int64_t>> rcombos = Combos(r_axes_);
    std::vector<UOpRef> acc(gcombos.size()), cur(gcombos.size());
    for (size_t g = 0; g < gcombos.size(); ++g) {
      UOpRef init = Broadcast(Identity(rop, dt), w_);
      acc[g] = UOp::Make(Op::kDefineAcc, dt.Vec(static_cast<int>(w_)), {init},
                         Arg(static_cast<int64_t>(acc_id_++)));
      em_.Emit(acc[g], true);
      cur[g] = acc[g];
    }
    int reduce_loops = 0, stage_loops = -1;
    for (int a = k_.first_reduce() + k_.group_dims(); a < k_.first_upcast(); ++a) {
      int64_t s = k_.full_shape()[a];
      if (s == 1) {
        idx_[a] = UOp::ConstInt(0);
        continue;
      }
      UOpRef r = UOp::Make(Op::kRange, dtypes::kIndex, {UOp::ConstInt(0), UOp::ConstInt(s)},
                           Arg(std::vector<int64_t>{range_id_++, 0}));
      idx_[a] = r;
      em_.OpenLoop(r);
      ++reduce_loops;
      if (stager_ && a == stager_->axis()) {  // this slice into local memory
        for (const UOpRef& u : stager_->Copy(idx_)) em_.Emit(u, true);
        stage_loops = reduce_loops;
      }
    }
    for (size_t g = 0; g < gcombos.size(); ++g) {
      for (const auto& rc : rcombos) {
        combo_ = gcombos[g];
        combo_.insert(rc.begin(), rc.end());
        const UOpRef& x = red->src(0);
        UOpRef nv;
        if (rop == Op::kAdd && x->op() == Op::kMul && dt.IsFloat()) {
          ASSIGN_OR_RETURN(UOpRef a, LowerNode(x->src(0), w_));
          ASSIGN_OR_RETURN(UOpRef b, LowerNode(x->src(1), w_));
          nv = UOp::Make(Op::kMulAcc, a->dtype(), {a, b, cur[g]});
        } else {
          ASSIGN_OR_RETURN(UOpRef v, LowerNode(x, w_));
          nv = Alu(rop, {cur[g], v});
        }
        cur[g] = UOp::Make(Op::kAssign, nv->dtype(), {acc[g], nv});
        em_.Emit(cur[g], true);
      }
    }
    for (int open = reduce_loops; open > 0; --open) {
      // The slice's last reads of local memory come before the next copy.
      if (open == stage_loops) em_.Emit(stager_->EndBarrier(cur), true);
      em_.CloseLoop();
    }
    for (size_t g = 0; g < gcombos.size(); ++g) {
      UOpRef res = acc[g];
      if (vec_is_reduce()) {  // horizontal reduce of the vector lanes
        res = UOp::Make(Op::kGep, dt, {acc[g]}, Arg(int64_t{0}));
        for (int64_t l = 1; l < w_; ++l)
          res = Alu(rop, {res, UOp::Make(Op::kGep, dt, {acc[g]}, Arg(l))});
      }
      reduce_result_[Key(gcombos[g])] = res;
    }
    if (k_.group_dims() > 0) CombineGroup(rop, dt, gcombos);
    return absl::OkStatus();
  }

  // Post-reduce values and the store, for each global upcast copy.
  absl::Status LowerStores(LinearProgram* /*p*/) {
    for (const auto& gc : Combos(g_axes_)) {
      combo_ = gc;
      RETURN_IF_ERROR(LowerStore());
    }
    for (int i = 0; i < open_loops_; ++i) em_.CloseLoop();
    return absl::OkStatus();
  }

  absl::Status FlattenProgram(LinearProgram* p) {
    p->uops = em_.Flatten();
    return absl::OkStatus();
  }

  // Buffers first, in parameter order; every parameter defined.
  absl::Status OrderParameters(LinearProgram* p) {
    std::set<int64_t> params;
    for (const UOpRef& u : p->uops) {
      if (u->op() == Op::kDefineGlobal) params.insert(u->arg().Int());
      if (u->op() == Op::kDefineVar) p->vars.push_back(u->arg().Str());
    }
    // A buffer whose every access folded away (a load masked out entirely)
    // still takes its parameter slot: launches pass buffers by position.
    for (const UOp* u : Toposort(k_.ast()))
      if (u->op() == Op::kDefineGlobal && params.insert(u->arg().Int()).second)
        p->uops.push_back(u->ref());
    p->num_bufs = params.empty() ? 0 : static_cast<int>(*params.rbegin()) + 1;
    if (static_cast<size_t>(p->num_bufs) != params.size())
      return absl::InternalError("lowering: kernel buffer parameters are not contiguous");
    std::stable_partition(p->uops.begin(), p->uops.end(),
                          [](const UOpRef& u) { return u->op() == Op::kDefineGlobal; });
    std::stable_sort(p->uops.begin(), p->uops.begin() + p->num_bufs,
                     [](const UOpRef& a, const UOpRef& b) { return a->arg().Int() < b->arg().Int(); });
    return absl::OkStatus();
  }

  absl::Status Check(LinearProgram* p) { return CheckLinearProgram(*p); }

  bool vec_is_reduce() const { return vx_ >= 0 && k_.IsReduceAxis(vx_); }

  std::vector<std::map<int, int64_t>> Combos(const std::vector<int>& axes) const {
    std::vector<std::map<int, int64_t>> out = {{}};
    for (int a : axes) {
      std::vector<std::map<int, int64_t>> next;
      for (const auto& c : out)
        for (int64_t v = 0; v < k_.full_shape()[a]; ++v) {
          auto m = c;
          m[a] = v;
          next.push_back(m);
        }
      out = next;
    }
    return out;
  }

  std::string Key(const std::map<int, int64_t>& c) const {
    std::string s;
    for (const auto& [a, v] : c) absl::StrAppend(&s, a, "=", v, ";");
    return s;
  }

  // GROUP: each thread of a group holds a partial result; they meet in local
  // memory (one slot per thread of the block), and after a barrier every
  // thread of the group combines the group's slots (all store the same
  // value).
  void CombineGroup(Op rop, DType dt, const std::vector<std::map<int, int64_t>>& gcombos) {
    const int ga = k_.first_reduce();  // the group axis
    const int64_t group = k_.full_shape()[ga];
    UOpRef slot = UOp::ConstInt(0), base = UOp::ConstInt(0);
    int64_t block = 1, stride = 1;
    for (int a = ga; a >= k_.first_local(); --a) {  // row-major, innermost first
      if (a == ga) {
        stride = block;
      } else {
        base = base + idx_[a] * block;
      }
      slot = slot + idx_[a] * block;
      block *= k_.full_shape()[a];
    }
    slot = Simplify(slot);
    UOpList stores, temps;
    for (size_t g = 0; g < gcombos.size(); ++g) {
      UOpRef temp = UOp::Make(Op::kDefineLocal, dt.Ptr(), {},
                              Arg(std::vector<int64_t>{static_cast<int64_t>(g), block}));
      UOpRef st = UOp::Make(Op::kStore, dtypes::kVoid,
                            {temp, slot, reduce_result_.at(Key(gcombos[g]))});
      em_.Emit(st, true);
      stores.push_back(st);
      temps.push_back(temp);
    }
    em_.Emit(UOp::Make(Op::kBarrier, dtypes::kVoid, stores), true);
    for (size_t g = 0; g < gcombos.size(); ++g) {
      UOpRef acc = UOp::Make(Op::kDefineAcc, dt, {Identity(rop, dt)},
                             Arg(static_cast<int64_t>(acc_id_++)));
      em_.Emit(acc, true);
      UOpRef r = UOp::Make(Op::kRange, dtypes::kIndex, {UOp::ConstInt(0), UOp::ConstInt(group)},
                           Arg(std::vector<int64_t>{range_id_++, 0}));
      em_.OpenLoop(r);
      UOpRef v = UOp::Make(Op::kLoad, dt, {temps[g], Simplify(base + r * stride)});
      em_.Emit(UOp::Make(Op::kAssign, dt, {acc, Alu(rop, {acc, v})}), true);
      em_.CloseLoop();
      reduce_result_[Key(gcombos[g])] = acc;
    }
  }

  // Maps axes [begin, end) (all non-unit ones) to at most three SPECIAL
  // indices prefix0..2: dim 0 is the innermost axis, dim 1 the next, dim 2
  // all others merged (recovered with div / mod). When a dim would exceed
  // its limit, every axis is merged into dim 0.
  absl::Status MapSpecials(int begin, int end, const std::string& prefix,
                           const std::array<int64_t, 3>& limit, std::array<int64_t, 3>* dims) {
    std::vector<int> axes;
    for (int a = begin; a < end; ++a) {
      if (k_.full_shape()[a] == 1) {
        idx_[a] = UOp::ConstInt(0);
      } else {
        axes.push_back(a);
      }
    }
    if (axes.empty()) return absl::OkStatus();
    const int n = static_cast<int>(axes.size());
    std::vector<std::vector<int>> groups;  // per dim, axes outer -> inner
    groups.push_back({axes[n - 1]});
    if (n >= 2) groups.push_back({axes[n - 2]});
    if (n >= 3) groups.push_back(std::vector<int>(axes.begin(), axes.end() - 2));
    auto size_of = [&](const std::vector<int>& g) {
      int64_t s = 1;
      for (int a : g) s *= k_.full_shape()[a];
      return s;
    };
    bool fits = true;
    for (size_t d = 0; d < groups.size(); ++d) fits &= size_of(groups[d]) <= limit[d];
    if (!fits) groups = {axes};
    if (size_of(groups[0]) > limit[0])
      return absl::InvalidArgumentError(absl::StrCat("kernel ", k_.Name(), ": ", prefix, " size ",
                                                     size_of(groups[0]), " exceeds ", limit[0]));
    for (size_t d = 0; d < groups.size(); ++d) {
      const std::vector<int>& g = groups[d];
      int64_t size = size_of(g);
      (*dims)[d] = size;
      UOpRef s = UOp::Make(Op::kSpecial, dtypes::kIndex, {UOp::ConstInt(size)},
                           Arg(absl::StrCat(prefix, d)));
      int64_t below = 1;
      for (int j = static_cast<int>(g.size()) - 1; j >= 0; --j) {
        int64_t sz = k_.full_shape()[g[j]];
        UOpRef q = below == 1 ? s : s / below;
        idx_[g[j]] = j == 0 ? q : q % sz;
        below *= sz;
      }
    }
    return absl::OkStatus();
  }

  // Per-axis index expressions for a view of shape `shape`, lane axis as var.
  UOpList Idxs(const Shape& shape, int64_t w) const {
    UOpList idxs(shape.size());
    for (size_t a = 0; a < shape.size(); ++a) {
      if (shape[a] == 1) {
        idxs[a] = UOp::ConstInt(0);
      } else if (static_cast<int>(a) == vx_) {
        idxs[a] = w > 1 ? lane_ : UOp::ConstInt(0);
      } else if (static_cast<int>(a) >= k_.first_upcast()) {
        idxs[a] = UOp::ConstInt(combo_.at(static_cast<int>(a)));
      } else {
        idxs[a] = idx_[a];
      }
    }
    return idxs;
  }

  // True when `n` reads zero in the whole current segment (another part of
  // a concatenation): its index is not built (a 16-part stack: 0.2 s less).
  // Likewise a load masked out in the current copy of a stack upcast whole
  // (Kernel::stacked_axis: 16 copies would each build all 16 parts' loads).
  bool OutsideSegment(const UOp* n) const {
    const int stacked = k_.stacked_axis();
    if (auto it = combo_.find(stacked); stacked >= 0 && it != combo_.end() &&
                                        k_.MaskedOutOn(n, stacked, it->second, it->second + 1))
      return true;
    const int a0 = k_.ParallelAxis();
    if (a0 < 0 || (segment_.first == 0 && segment_.second == k_.full_shape()[a0])) return false;
    return k_.MaskedOutOn(n, a0, segment_.first, segment_.second);
  }

  absl::StatusOr<UOpRef> LowerLoad(const UOp* n, int64_t w) {
    const ShapeTracker& st = k_.StOf(n);
    if (OutsideSegment(n)) return Broadcast(ConstOf(n->dtype().Scalar(), 0), w);
    if (UOpRef l = stager_ ? stager_->Load(n, Idxs(st.shape(), w)) : nullptr) {
      em_.Emit(l, true);  // pinned: after the slice's barrier
      return l;
    }
    auto [idx, valid] = st.ToIndex(Idxs(st.shape(), w));
    if (n->src().size() > 1) {  // a gather: plus an offset computed from data
      ASSIGN_OR_RETURN(UOpRef off, LowerNode(n->src(1), w));
      if (w == 1 || off->dtype().count == 1)
        return lanes_.Load(n->src(0), n->dtype(), idx + off, valid, w);
      UOpList lanes;  // one load per lane at that lane's offset
      for (int64_t l = 0; l < w; ++l) {
        UOpRef lane_off = UOp::Make(Op::kGep, off->dtype().Scalar(), {off}, Arg(l));
        lanes.push_back(GatedLoad(n->src(0), n->dtype(), lanes_.At(idx, l) + lane_off,
                                  lanes_.At(valid, l)));
      }
      return UOp::Make(Op::kVectorize, n->dtype().Vec(static_cast<int>(w)), lanes);
    }
    return lanes_.Load(n->src(0), n->dtype(), idx, valid, w);
  }

  UOpRef LowerValid(const UOp* n, int64_t w) {
    const ShapeTracker& st = k_.StOf(n);
    if (OutsideSegment(n)) return Broadcast(ConstOf(dtypes::kBool, 0), w);
    auto [idx, valid] = st.ToIndex(Idxs(st.shape(), w));
    if (w == 1 || !Contains(valid, lane_.get())) return Broadcast(valid, w);
    return lanes_.Vector(valid, w);
  }

  absl::StatusOr<UOpRef> LowerNode(const UOpRef& n, int64_t w) {
    std::string key = absl::StrCat(reinterpret_cast<uintptr_t>(n.get()), "/", w, "/", Key(combo_));
    auto hit = memo_.find(key);
    if (hit != memo_.end()) return hit->second;
    UOpRef r;
    switch (n->op()) {
      case Op::kLoad: {
        ASSIGN_OR_RETURN(r, LowerLoad(n.get(), w));
        break;
      }
      case Op::kValid: r = LowerValid(n.get(), w); break;
      case Op::kConst: r = Broadcast(n, w); break;
      case Op::kReduceAxis: {
        std::map<int, int64_t> g;
        for (int a : g_axes_) g[a] = combo_.at(a);
        r = reduce_result_.at(Key(g));
        break;
      }
      default: {
        if (!(IsAlu(n->op()) || n->op() == Op::kCast || n->op() == Op::kBitcast))
          return absl::InternalError(absl::StrCat("lowerer: unexpected ", n->Describe()));
        // Contractions into FMAs, divisions by constants (float_rules.h).
        if (UOpRef f = RewriteFloatNode(n)) {
          keep_.push_back(f);
          ASSIGN_OR_RETURN(r, LowerNode(f, w));
          break;
        }
        UOpList src;
        for (const UOpRef& s : n->src()) {
          ASSIGN_OR_RETURN(UOpRef l, LowerNode(s, w));
          src.push_back(l);
        }
        DType dt = n->dtype().Vec(static_cast<int>(w));
        // Folded as it is made: a segment's masked-out loads are constants,
        // and the selects and sums over them would otherwise reach the
        // source (a Winograd transform's 16 segments: 3x its size in C).
        r = SimplifyNode(UOp::Make(n->op(), dt, src, n->arg()));
      }
    }
    keep_.push_back(n);
    memo_[key] = r;
    return r;
  }

  absl::Status LowerStore() {
    const UOp* store = k_.ast()->src(0).get();
    ASSIGN_OR_RETURN(UOpRef value, LowerNode(store->src(1), w_post_));
    const ShapeTracker& st = k_.StOf(store);
    auto [idx, valid] = st.ToIndex(Idxs(st.shape(), w_post_));
    const UOpRef& buf = store->src(0);
    auto store_op = [&](const UOpRef& i, const UOpRef& v, const UOpRef& ok) {
      if (ok->IsConstInt(0)) return;
      UOpList src = {buf, i, v};
      if (!ok->IsConstInt(1)) src.push_back(ok);
      em_.Emit(UOp::Make(Op::kStore, dtypes::kVoid, src), true);
    };
    if (w_post_ == 1) {
      store_op(idx, value, valid);
      return absl::OkStatus();
    }
    UOpRef idx0 = lanes_.At(idx, 0);
    if (Simplify(idx - idx0) == lane_) {  // one vector store, masked if the gate varies by lane
      store_op(idx0, value, Contains(valid, lane_.get()) ? lanes_.Vector(valid, w_post_) : valid);
      return absl::OkStatus();
    }
    DType sdt = value->dtype().Scalar();
    for (int64_t l = 0; l < w_post_; ++l)
      store_op(lanes_.At(idx, l), UOp::Make(Op::kGep, sdt, {value}, Arg(l)), lanes_.At(valid, l));
    return absl::OkStatus();
  }

  const Kernel& k_;
  Emitter em_;
  std::unique_ptr<LocalStager> stager_;
  int vx_ = -1;
  int64_t w_ = 1, w_post_ = 1;
  UOpRef lane_;
  Lanes lanes_{nullptr};
  UOpList idx_;
  std::vector<int> g_axes_, r_axes_;
  std::map<int, int64_t> combo_;
  std::unordered_map<std::string, UOpRef> reduce_result_;
  std::unordered_map<std::string, UOpRef> memo_;
  UOpList keep_;
  int acc_id_ = 0;
  int range_id_ = 0;
  int open_loops_ = 0;
  std::pair<int64_t, int64_t> segment_{0, 0};  // of the parallel axis (Segments)
};

}  // namespace

absl::StatusOr<LinearProgram> Lower(const Kernel& k) {
  Lowerer l(k);
  return l.Run();
}

}  // namespace kiln
