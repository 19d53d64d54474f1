#include "engine/jit/capture.h"

#include <cstdio>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"

namespace kiln::jit_internal {
namespace {

// A recording cut at its reads: segment k runs up to read k; the last one
// has no read and ends with the outputs.
struct Segment {
  std::vector<ExecItem> items;
  const HostRead* read = nullptr;
};

std::vector<Segment> Split(const Recording& rec) {
  std::vector<Segment> segs(1);
  size_t next = 0;
  for (const HostRead& r : rec.reads) {
    for (; next < r.after_items && next < rec.items.size(); ++next)
      segs.back().items.push_back(rec.items[next]);
    segs.back().read = &r;
    segs.emplace_back();
  }
  for (; next < rec.items.size(); ++next) segs.back().items.push_back(rec.items[next]);
  return segs;
}

int InputIndex(const BufferRef& b, const std::vector<BufferRef>& in_bufs) {
  for (size_t i = 0; i < in_bufs.size(); ++i)
    if (b == in_bufs[i]) return static_cast<int>(i);
  return -1;
}

bool SameKernel(const ExecItem& a, const ExecItem& b) {
  if (a.kernel != b.kernel &&
      (a.kernel->source != b.kernel->source || a.kernel->name != b.kernel->name))
    return false;
  return a.vars == b.vars && a.bufs.size() == b.bufs.size();
}

// Buffers of a new recording -> the tree's buffers they correspond to.
using BufferMap = std::unordered_map<const Buffer*, BufferRef>;

absl::Status Correspond(const BufferRef& mine, const BufferRef& theirs, BufferMap* map) {
  if (mine->nbytes() != theirs->nbytes())
    return absl::InternalError("jit: a shared segment uses buffers of other sizes");
  auto [it, fresh] = map->emplace(mine.get(), theirs);
  if (!fresh && it->second != theirs)
    return absl::InternalError("jit: a shared segment uses its buffers differently");
  return absl::OkStatus();
}

// Matches segment `seg` of a new recording with the tree node `n` it should
// share, extending `map`.
absl::Status MatchNode(const Node& n, const Segment& seg, const std::vector<BufferRef>& in_bufs,
                       BufferMap* map) {
  if (n.items.size() != seg.items.size())
    return absl::InternalError("jit: a shared segment ran a different number of kernels");
  std::map<std::pair<size_t, size_t>, int> input_at;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    for (const Slot& s : n.inputs[i]) input_at[{s.item, s.pos}] = static_cast<int>(i);
  for (size_t k = 0; k < seg.items.size(); ++k) {
    const ExecItem& a = n.items[k];
    const ExecItem& b = seg.items[k];
    if (!SameKernel(a, b)) return absl::InternalError("jit: a shared segment ran other kernels");
    for (size_t p = 0; p < b.bufs.size(); ++p) {
      auto in = input_at.find({k, p});
      int theirs = in == input_at.end() ? -1 : in->second;
      if (theirs != InputIndex(b.bufs[p], in_bufs))
        return absl::InternalError("jit: a shared segment reads other inputs");
      if (theirs < 0) RETURN_IF_ERROR(Correspond(b.bufs[p], a.bufs[p], map));
    }
  }
  const Node::Read& r = *n.read;
  int in = InputIndex(seg.read->buffer, in_bufs);
  if (in != r.input || seg.read->bytes.size() != r.nbytes)
    return absl::InternalError("jit: a shared segment ends with another read");
  if (in < 0) RETURN_IF_ERROR(Correspond(seg.read->buffer, r.buffer, map));
  return absl::OkStatus();
}

BufferRef Mapped(const BufferRef& b, const BufferMap& map) {
  auto it = map.find(b.get());
  return it == map.end() ? b : it->second;
}

// A node from a segment of a new recording, re-pointed through `map`.
absl::StatusOr<std::unique_ptr<Node>> NewNode(const Segment& seg,
                                              const std::vector<BufferRef>& in_bufs,
                                              const BufferMap& map) {
  auto n = std::make_unique<Node>();
  n->inputs.resize(in_bufs.size());
  n->items = seg.items;
  for (size_t k = 0; k < n->items.size(); ++k) {
    ExecItem& e = n->items[k];
    n->flops += e.kernel->flops;
    n->bytes += e.kernel->bytes;
    std::vector<void*> ptrs;
    for (size_t p = 0; p < e.bufs.size(); ++p) {
      int in = InputIndex(e.bufs[p], in_bufs);
      if (in >= 0) {
        n->inputs[in].push_back({k, p});
        e.bufs[p].reset();  // the caller's input is not kept alive
        ptrs.push_back(nullptr);
        continue;
      }
      e.bufs[p] = Mapped(e.bufs[p], map);
      ASSIGN_OR_RETURN(void* ptr, e.bufs[p]->Ptr());
      ptrs.push_back(ptr);
    }
    n->ptrs.push_back(std::move(ptrs));
  }
  if (seg.read) {
    Node::Read r;
    r.input = InputIndex(seg.read->buffer, in_bufs);
    if (r.input < 0) r.buffer = Mapped(seg.read->buffer, map);
    r.nbytes = seg.read->bytes.size();
    n->read = r;
  }
  return n;
}

bool Uses(const Node& n, const BufferRef& b) {
  for (const ExecItem& e : n.items)
    for (const BufferRef& x : e.bufs)
      if (x == b) return true;
  return false;
}

}  // namespace

size_t CaptureTree::held_bytes() const {
  std::set<const Buffer*> held;
  std::vector<const Node*> todo;
  if (root_) todo.push_back(root_.get());
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    for (const ExecItem& e : n->items)
      if (!e.bufs.empty() && e.bufs[0]) held.insert(e.bufs[0].get());
    for (const Output& o : n->outputs)
      if (o.copy_from) held.insert(o.copy_from.get());
    if (n->read && n->read->buffer) held.insert(n->read->buffer.get());
    for (const auto& [bytes, next] : n->next) todo.push_back(next.get());
  }
  size_t total = 0;
  for (const Buffer* b : held) total += b->nbytes();
  return total;
}

absl::Status CaptureTree::Add(Recording rec, const std::vector<BufferRef>& in_bufs,
                              std::vector<Tensor>* outputs, bool use_graphs) {
  std::vector<Segment> segs = Split(rec);
  BufferMap map;
  // Walk down the segments the recording shares with the tree.
  Node* parent = nullptr;
  std::string key;
  size_t j = 0;
  for (Node* n = root_.get(); n != nullptr; ++j) {
    if (!n->read || !segs[j].read)
      return absl::InternalError("jit: a recording repeats a path the tree has");
    RETURN_IF_ERROR(MatchNode(*n, segs[j], in_bufs, &map));
    auto it = n->next.find(segs[j].read->bytes);
    if (it == n->next.end()) {
      parent = n;
      key = segs[j].read->bytes;
      ++j;
      break;
    }
    n = it->second.get();
  }
  if (root_ && parent == nullptr) return absl::InternalError("jit: nothing new to add");
  // The recording's own segments, as a chain of new nodes.
  std::vector<std::unique_ptr<Node>> chain;
  for (size_t k = j; k < segs.size(); ++k) {
    ASSIGN_OR_RETURN(std::unique_ptr<Node> n, NewNode(segs[k], in_bufs, map));
    chain.push_back(std::move(n));
  }
  Node& leaf = *chain.back();
  // Outputs: written only by the leaf's own kernels -> a fresh buffer per
  // replay (patched in); anything else the tree keeps -> copied out per
  // replay, and the caller gets a copy now (a replay rewrites the original).
  std::vector<BufferRef> out_bufs;
  for (Tensor& t : *outputs) {
    ASSIGN_OR_RETURN(BufferRef b, t.Buffer());
    out_bufs.push_back(b);
  }
  for (size_t o = 0; o < outputs->size(); ++o) {
    Output out;
    out.shape = (*outputs)[o].shape();
    out.dtype = (*outputs)[o].dtype();
    out.nbytes = static_cast<size_t>((*outputs)[o].numel()) * out.dtype.ItemSize();
    for (size_t p = 0; p < o && out.same_as < 0; ++p)
      if (out_bufs[p] == out_bufs[o]) out.same_as = static_cast<int>(p);
    if (out.same_as < 0) out.alias_input = InputIndex(out_bufs[o], in_bufs);
    if (out.same_as < 0 && out.alias_input < 0) {
      const BufferRef& b = out_bufs[o];
      bool written = false, shared = map.count(b.get()) > 0;
      for (const ExecItem& e : leaf.items) written |= !e.bufs.empty() && e.bufs[0] == b;
      for (size_t k = 0; k + 1 < chain.size(); ++k) shared |= Uses(*chain[k], b);
      if (written && !shared) {
        for (size_t k = 0; k < leaf.items.size(); ++k)
          for (size_t p = 0; p < leaf.items[k].bufs.size(); ++p)
            if (leaf.items[k].bufs[p] == b) {
              out.slots.push_back({k, p});
              leaf.items[k].bufs[p].reset();
              leaf.ptrs[k][p] = nullptr;
            }
      } else {
        out.copy_from = Mapped(b, map);
        if (written || shared) {  // kernels of the tree rewrite it
          ASSIGN_OR_RETURN(std::vector<uint8_t> host, (*outputs)[o].ToBytes());
          (*outputs)[o] = Tensor::FromData(engine_, host.data(), host.size(), out.shape, out.dtype,
                                           device_);
        }
      }
    }
    leaf.outputs.push_back(std::move(out));
  }
  if (use_graphs && !root_ && chain.size() == 1 && !leaf.items.empty()) {
    ASSIGN_OR_RETURN(Device * dev, engine_->GetDevice(device_));
    std::vector<GraphLaunch> launches;
    for (size_t k = 0; k < leaf.items.size(); ++k)
      launches.push_back({leaf.items[k].kernel->program.get(), leaf.ptrs[k], leaf.items[k].vars,
                          leaf.items[k].kernel->dims});
    // Devices without graphs (CPU, INTERP) answer Unimplemented: plain replay.
    absl::StatusOr<std::unique_ptr<GraphExecutor>> g = dev->NewGraph(launches);
    if (g.ok()) {
      leaf.graph = std::move(g).value();
      leaf.graph_ptrs = leaf.ptrs;
    } else if (g.status().code() != absl::StatusCode::kUnimplemented) {
      return g.status();
    }
  }
  // Link the chain and hang it into the tree.
  for (size_t k = chain.size() - 1; k > 0; --k) {
    std::string bytes = segs[j + k - 1].read->bytes;
    chain[k - 1]->next[bytes] = std::move(chain[k]);
  }
  nodes_ += chain.size();
  ++leaves_;
  if (parent) parent->next[key] = std::move(chain[0]);
  else root_ = std::move(chain[0]);
  return absl::OkStatus();
}

// The node's parallel plan for the device's workers now (null with one
// worker), made when first needed or when the worker count changed.
static ParallelPlan* PlanFor(Node* n, Device* dev) {
  const int workers = dev->workers();
  if (workers < 2) return nullptr;
  if (!n->plan || n->plan->workers() != workers) {
    n->plan = std::make_unique<ParallelPlan>(*n, workers);
    if (n->plan->parallel() && Env().debug >= 1)
      std::fprintf(stderr,
                   "jit: %zu kernels replay side by side on %d threads (longest chain %.0f%% of "
                   "the work)\n",
                   n->items.size(), workers, 100 * n->plan->critical_share());
  }
  return n->plan.get();
}

absl::StatusOr<CaptureTree::Replayed> CaptureTree::Replay(const std::vector<Tensor>& inputs,
                                                          const std::vector<BufferRef>& in_bufs) {
  ASSIGN_OR_RETURN(Device * dev, engine_->GetDevice(device_));
  std::vector<void*> in_ptrs;
  for (const BufferRef& b : in_bufs) {
    ASSIGN_OR_RETURN(void* p, b->Ptr());
    in_ptrs.push_back(p);
  }
  const bool debug = Env().debug >= 2;
  Replayed out;
  for (Node* n = root_.get(); n != nullptr;) {
    for (size_t i = 0; i < in_ptrs.size() && i < n->inputs.size(); ++i)
      for (const Slot& s : n->inputs[i]) n->ptrs[s.item][s.pos] = in_ptrs[i];
    std::vector<BufferRef> outs(n->outputs.size());
    for (size_t o = 0; o < n->outputs.size(); ++o) {
      const Output& x = n->outputs[o];
      if (x.slots.empty()) continue;
      ASSIGN_OR_RETURN(outs[o], dev->NewBuffer(x.nbytes));
      ASSIGN_OR_RETURN(void* p, outs[o]->Ptr());
      for (const Slot& s : x.slots) n->ptrs[s.item][s.pos] = p;
    }
    if (n->graph) {
      // Patch the launches whose buffers changed, then one graph launch.
      for (size_t k = 0; k < n->items.size(); ++k) {
        if (n->ptrs[k] == n->graph_ptrs[k]) continue;
        RETURN_IF_ERROR(n->graph->Update(k, n->ptrs[k], n->items[k].vars));
        n->graph_ptrs[k] = n->ptrs[k];
      }
      double t = 0;
      RETURN_IF_ERROR(n->graph->Run(debug, debug ? &t : nullptr));
      if (debug) std::fprintf(stderr, "jit graph of %zu kernels: %9.2f us\n", n->items.size(), t * 1e6);
    } else if (ParallelPlan* plan = PlanFor(n, dev); plan != nullptr && plan->parallel()) {
      RETURN_IF_ERROR(plan->Run(dev, *n, debug));
      out.parallel = true;
    } else {
      for (size_t k = 0; k < n->items.size(); ++k) {
        const ExecItem& e = n->items[k];
        double t = 0;
        RETURN_IF_ERROR(e.kernel->program->Launch(n->ptrs[k], e.vars, e.kernel->dims, debug,
                                                  debug ? &t : nullptr));
        if (debug) std::fprintf(stderr, "%s (jit)\n", DebugLine(*e.kernel, t).c_str());
      }
    }
    out.kernels += n->items.size();
    out.flops += n->flops;
    out.bytes += n->bytes;
    if (!n->read) {  // a leaf: the outputs
      for (size_t o = 0; o < n->outputs.size(); ++o) {
        const Output& x = n->outputs[o];
        if (x.same_as >= 0) {
          out.outputs.push_back(out.outputs[x.same_as]);
        } else if (x.alias_input >= 0) {
          out.outputs.push_back(inputs[x.alias_input].Reshape(x.shape));
        } else {
          BufferRef b = outs[o];
          if (!b) {
            ASSIGN_OR_RETURN(b, dev->NewBuffer(x.nbytes));
            std::vector<uint8_t> host(x.nbytes);
            if (!host.empty()) {
              RETURN_IF_ERROR(x.copy_from->CopyOut(host.data(), host.size()));
              RETURN_IF_ERROR(b->CopyIn(host.data(), host.size()));
            }
          }
          out.outputs.push_back(Tensor::FromBuffer(engine_, b, x.shape, x.dtype, device_));
        }
      }
      out.hit = true;
      return out;
    }
    std::string bytes(n->read->nbytes, '\0');
    const BufferRef& src = n->read->input >= 0 ? in_bufs[n->read->input] : n->read->buffer;
    if (!bytes.empty()) RETURN_IF_ERROR(src->CopyOut(bytes.data(), bytes.size()));
    auto it = n->next.find(bytes);
    if (it == n->next.end()) return out;  // a miss: no branch read these bytes
    n = it->second.get();
  }
  return out;
}

}  // namespace kiln::jit_internal
