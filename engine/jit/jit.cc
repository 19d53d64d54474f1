#include "engine/jit/jit.h"

#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"
#include "engine/shape/shape_tracker.h"
#include "engine/uop/buffer.h"

namespace kiln {

struct Jit::Capture {
  struct Slot {
    size_t item;
    size_t pos;
  };
  struct Output {
    Shape shape;
    DType dtype;
    size_t nbytes = 0;
    std::vector<Slot> slots;
    int alias_input = -1;   // the output is input i itself
    int same_as = -1;       // the output is an earlier output
    BufferRef constant;     // not written by any kernel: copied per replay
  };
  std::string signature;
  Engine* engine = nullptr;
  std::string device;
  std::vector<ExecItem> items;           // intermediates stay referenced here
  std::vector<std::vector<void*>> ptrs;  // device pointers per item, patched per replay
  std::vector<std::vector<Slot>> inputs;
  std::vector<Output> outputs;
  double flops = 0, bytes = 0;
  uint64_t replays = 0;
  // The device's launch graph of the items, with the pointers it holds.
  std::unique_ptr<GraphExecutor> graph;
  std::vector<std::vector<void*>> graph_ptrs;
};

Jit::Jit(Fn fn, Options options) : fn_(std::move(fn)), options_(options) {}
Jit::~Jit() = default;

std::string Jit::Signature(const std::vector<Tensor>& inputs) {
  std::vector<std::string> parts;
  for (const Tensor& t : inputs)
    parts.push_back(absl::StrCat(t.dtype().Name(), "[", absl::StrJoin(t.shape(), ","), "]@",
                                 t.device()));
  return absl::StrJoin(parts, ";");
}

namespace {

bool IsWholeBuffer(const Tensor& t) {
  const UOpRef& u = t.uop();
  if (u->op() == Op::kBuffer) return true;
  return u->op() == Op::kView && u->src(0)->op() == Op::kBuffer && StOf(*u)->contiguous() &&
         StOf(*u)->size() == BufferOf(*u->src(0)).size();
}

// Realized, contiguous, pairwise distinct input buffers.
absl::Status PrepareInputs(const std::vector<Tensor>& in, std::vector<Tensor>* out,
                           std::vector<BufferRef>* bufs) {
  std::set<const Buffer*> seen;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat("jit input ", i, ": ", t.status().message()));
    Tensor c = IsWholeBuffer(t) ? t : t.Contiguous();
    ASSIGN_OR_RETURN(BufferRef b, c.Buffer());
    if (seen.count(b.get())) {  // the same buffer twice: give this one a copy
      c = c.Contiguous();
      ASSIGN_OR_RETURN(b, c.Buffer());
    }
    seen.insert(b.get());
    out->push_back(c);
    bufs->push_back(std::move(b));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> Jit::RunPlain(const std::vector<Tensor>& inputs) {
  ASSIGN_OR_RETURN(std::vector<Tensor> outs, fn_(inputs));
  std::vector<Tensor*> ptrs;
  for (Tensor& t : outs) ptrs.push_back(&t);
  RETURN_IF_ERROR(Tensor::RealizeAll(ptrs));
  return outs;
}

absl::StatusOr<std::unique_ptr<Jit::Capture>> Jit::Record(const std::vector<Tensor>& inputs,
                                                          const std::vector<BufferRef>& in_bufs,
                                                          std::vector<Tensor>* outputs) {
  auto c = std::make_unique<Capture>();
  {
    CaptureScope scope;
    ASSIGN_OR_RETURN(*outputs, RunPlain(inputs));
    if (scope.host_reads() > 0)
      return absl::FailedPreconditionError(
          "jit: the function read tensor data on the host while being captured; a replay "
          "could not repeat that decision, so it cannot be captured");
    c->items = scope.Take();
  }
  c->signature = Signature(inputs);
  c->engine = inputs.empty() ? (outputs->empty() ? nullptr : (*outputs)[0].engine())
                             : inputs[0].engine();
  c->device = inputs.empty() ? (outputs->empty() ? "CPU" : (*outputs)[0].device())
                             : inputs[0].device();
  c->inputs.resize(in_bufs.size());
  std::vector<BufferRef> out_bufs;
  for (Tensor& t : *outputs) {
    ASSIGN_OR_RETURN(BufferRef b, t.Buffer());
    out_bufs.push_back(b);
  }
  for (size_t k = 0; k < c->items.size(); ++k) {
    const ExecItem& e = c->items[k];
    c->flops += e.kernel->flops;
    c->bytes += e.kernel->bytes;
    for (size_t p = 0; p < e.bufs.size(); ++p)
      for (size_t i = 0; i < in_bufs.size(); ++i)
        if (e.bufs[p] == in_bufs[i]) c->inputs[i].push_back({k, p});
  }
  for (size_t o = 0; o < outputs->size(); ++o) {
    Capture::Output out;
    out.shape = (*outputs)[o].shape();
    out.dtype = (*outputs)[o].dtype();
    out.nbytes = out_bufs[o]->nbytes();
    for (size_t j = 0; j < o; ++j)
      if (out_bufs[j] == out_bufs[o]) out.same_as = static_cast<int>(j);
    for (size_t i = 0; i < in_bufs.size() && out.same_as < 0; ++i)
      if (in_bufs[i] == out_bufs[o]) out.alias_input = static_cast<int>(i);
    if (out.same_as < 0 && out.alias_input < 0) {
      // Written by a captured kernel: every use of it is patched per replay.
      // Otherwise (a buffer made before or outside the kernels) it is a
      // constant: kernels keep reading it, and each replay returns a copy.
      bool produced = false;
      for (const ExecItem& e : c->items) produced |= !e.bufs.empty() && e.bufs[0] == out_bufs[o];
      if (produced) {
        for (size_t k = 0; k < c->items.size(); ++k)
          for (size_t p = 0; p < c->items[k].bufs.size(); ++p)
            if (c->items[k].bufs[p] == out_bufs[o]) out.slots.push_back({k, p});
      } else {
        out.constant = out_bufs[o];
      }
    }
    c->outputs.push_back(std::move(out));
  }
  // Device pointers; the caller's inputs and outputs are not kept alive.
  for (ExecItem& e : c->items) {
    std::vector<void*> p;
    for (const BufferRef& b : e.bufs) {
      ASSIGN_OR_RETURN(void* ptr, b->Ptr());
      p.push_back(ptr);
    }
    c->ptrs.push_back(std::move(p));
  }
  for (const auto& slots : c->inputs)
    for (const auto& s : slots) c->items[s.item].bufs[s.pos].reset();
  for (const auto& o : c->outputs)
    for (const auto& s : o.slots) c->items[s.item].bufs[s.pos].reset();
  if (options_.use_graphs && c->engine != nullptr && !c->items.empty()) {
    ASSIGN_OR_RETURN(Device * dev, c->engine->GetDevice(c->device));
    std::vector<GraphLaunch> launches;
    for (size_t k = 0; k < c->items.size(); ++k) {
      const ExecItem& e = c->items[k];
      launches.push_back({e.kernel->program.get(), c->ptrs[k], e.vars, e.kernel->dims});
    }
    // Devices without graphs (CPU, INTERP) answer Unimplemented: plain replay.
    absl::StatusOr<std::unique_ptr<GraphExecutor>> g = dev->NewGraph(launches);
    if (g.ok()) {
      c->graph = std::move(g).value();
      c->graph_ptrs = c->ptrs;
    } else if (g.status().code() != absl::StatusCode::kUnimplemented) {
      return g.status();
    }
  }
  return c;
}

absl::StatusOr<std::vector<Tensor>> Jit::Replay(Capture* c, const std::vector<Tensor>& inputs,
                                                const std::vector<BufferRef>& in_bufs) {
  for (size_t i = 0; i < in_bufs.size(); ++i) {
    ASSIGN_OR_RETURN(void* p, in_bufs[i]->Ptr());
    for (const auto& s : c->inputs[i]) c->ptrs[s.item][s.pos] = p;
  }
  ASSIGN_OR_RETURN(Device * dev, c->engine->GetDevice(c->device));
  std::vector<BufferRef> outs(c->outputs.size());
  for (size_t o = 0; o < c->outputs.size(); ++o) {
    const Capture::Output& out = c->outputs[o];
    if (out.same_as >= 0 || out.alias_input >= 0) continue;
    ASSIGN_OR_RETURN(outs[o], dev->NewBuffer(out.nbytes));
    ASSIGN_OR_RETURN(void* p, outs[o]->Ptr());
    for (const auto& s : out.slots) c->ptrs[s.item][s.pos] = p;
    if (out.constant) {
      std::vector<uint8_t> host(out.nbytes);
      RETURN_IF_ERROR(out.constant->CopyOut(host.data(), host.size()));
      RETURN_IF_ERROR(outs[o]->CopyIn(host.data(), host.size()));
    }
  }
  const bool debug = Env().debug >= 2;
  if (c->graph) {
    // Patch the launches whose buffers changed, then one graph launch.
    for (size_t k = 0; k < c->items.size(); ++k) {
      if (c->ptrs[k] == c->graph_ptrs[k]) continue;
      RETURN_IF_ERROR(c->graph->Update(k, c->ptrs[k], c->items[k].vars));
      c->graph_ptrs[k] = c->ptrs[k];
    }
    double t = 0;
    RETURN_IF_ERROR(c->graph->Run(debug, debug ? &t : nullptr));
    if (debug)
      std::fprintf(stderr, "jit graph of %zu kernels: %9.2f us\n", c->items.size(), t * 1e6);
  }
  for (size_t k = 0; k < c->items.size() && !c->graph; ++k) {
    const ExecItem& e = c->items[k];
    double t = 0;
    RETURN_IF_ERROR(e.kernel->program->Launch(c->ptrs[k], e.vars, e.kernel->dims, debug,
                                              debug ? &t : nullptr));
    if (debug) std::fprintf(stderr, "%s (jit)\n", DebugLine(*e.kernel, t).c_str());
  }
  std::vector<Tensor> result;
  for (size_t o = 0; o < c->outputs.size(); ++o) {
    const Capture::Output& out = c->outputs[o];
    if (out.same_as >= 0) {
      result.push_back(result[out.same_as]);
    } else if (out.alias_input >= 0) {
      result.push_back(inputs[out.alias_input].Reshape(out.shape));
    } else {
      result.push_back(Tensor::FromBuffer(c->engine, outs[o], out.shape, out.dtype, c->device));
    }
  }
  c->replays++;
  return result;
}

absl::StatusOr<std::vector<Tensor>> Jit::operator()(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> prepared;
  std::vector<BufferRef> bufs;
  RETURN_IF_ERROR(PrepareInputs(inputs, &prepared, &bufs));
  for (const Tensor& t : prepared)
    if (!prepared.empty() && (t.engine() != prepared[0].engine()))
      return absl::InvalidArgumentError("jit: inputs belong to different engines");
  std::string sig = Signature(prepared);
  absl::MutexLock l(&mu_);
  stats_.calls++;
  Entry& e = entries_[sig];
  lru_.remove(sig);
  lru_.push_front(sig);
  while (lru_.size() > options_.max_captures) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  e.calls++;
  if (e.capture) {
    stats_.replays++;
    return Replay(e.capture.get(), prepared, bufs);
  }
  if (e.calls == 1) {
    stats_.plain_runs++;
    return RunPlain(prepared);
  }
  std::vector<Tensor> outs;
  ASSIGN_OR_RETURN(e.capture, Record(prepared, bufs, &outs));
  stats_.captures++;
  if (Env().debug >= 1)
    std::fprintf(stderr, "jit: captured %zu kernels for %s (%.3g GFLOP, %.3g MB)\n",
                 e.capture->items.size(), sig.c_str(), e.capture->flops * 1e-9,
                 e.capture->bytes * 1e-6);
  return outs;
}

std::vector<Jit::CaptureInfo> Jit::captures() const {
  absl::MutexLock l(&mu_);
  std::vector<CaptureInfo> out;
  for (const auto& [sig, e] : entries_) {
    if (!e.capture) continue;
    out.push_back({sig, e.capture->items.size(), e.capture->flops, e.capture->bytes,
                   e.capture->replays});
  }
  return out;
}

Jit::Stats Jit::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

}  // namespace kiln
