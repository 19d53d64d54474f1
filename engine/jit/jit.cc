#include "engine/jit/jit.h"

#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"
#include "engine/jit/capture.h"
#include "engine/shape/shape_tracker.h"
#include "engine/uop/buffer.h"

namespace kiln {

struct Jit::Entry {
  uint64_t calls = 0, hits = 0, misses = 0;
  // Replays of this signature mostly missed: run plainly from now on.
  bool plain_only = false;
  std::unique_ptr<jit_internal::CaptureTree> tree;
  size_t kernels = 0;  // the last path recorded or replayed
  double flops = 0, bytes = 0;
  size_t held_bytes = 0;  // tree->held_bytes() after the last Add
};

Jit::Jit(Fn fn, Options options) : fn_(std::move(fn)), options_(options) {}
Jit::~Jit() = default;

namespace {

std::string SignaturePart(DType dtype, const Shape& shape, const std::string& device) {
  return absl::StrCat(dtype.Name(), "[", absl::StrJoin(shape, ","), "]@", device);
}

}  // namespace

std::string Jit::Signature(const std::vector<Tensor>& inputs) {
  std::vector<std::string> parts;
  for (const Tensor& t : inputs) parts.push_back(SignaturePart(t.dtype(), t.shape(), t.device()));
  return absl::StrJoin(parts, ";");
}

bool Jit::HasCapture(const std::vector<DType>& dtypes, const std::vector<Shape>& shapes,
                     const std::string& device) const {
  if (dtypes.size() != shapes.size()) return false;
  std::vector<std::string> parts;
  for (size_t i = 0; i < dtypes.size(); ++i)
    parts.push_back(SignaturePart(dtypes[i], shapes[i], device));
  const std::string sig = absl::StrJoin(parts, ";");
  absl::MutexLock l(&mu_);
  auto it = entries_.find(sig);
  return it != entries_.end() && !it->second->plain_only && it->second->tree &&
         !it->second->tree->empty();
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

absl::StatusOr<Jit::Result> Jit::RunPlain(const std::vector<Tensor>& inputs,
                                           jit_internal::Recording* rec) {
  Result r;
  CaptureScope scope;  // what ran, and what was read back
  ASSIGN_OR_RETURN(r.outputs, fn_(inputs));
  std::vector<Tensor*> ptrs;
  for (Tensor& t : r.outputs) ptrs.push_back(&t);
  RETURN_IF_ERROR(Tensor::RealizeAll(ptrs));
  for (const ExecItem& e : scope.items()) {
    r.flops += e.kernel->flops;
    r.bytes += e.kernel->bytes;
  }
  r.kernels = scope.items().size();
  if (rec) {
    rec->items = scope.Take();
    rec->reads = scope.TakeReads();
  }
  return r;
}

absl::StatusOr<Jit::Result> Jit::Call(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> prepared;
  std::vector<BufferRef> bufs;
  RETURN_IF_ERROR(PrepareInputs(inputs, &prepared, &bufs));
  for (const Tensor& t : prepared)
    if (t.engine() != prepared[0].engine())
      return absl::InvalidArgumentError("jit: inputs belong to different engines");
  std::string sig = Signature(prepared);
  absl::MutexLock l(&mu_);
  stats_.calls++;
  std::unique_ptr<Entry>& slot = entries_[sig];
  if (!slot) slot = std::make_unique<Entry>();
  Entry& e = *slot;
  lru_.remove(sig);
  lru_.push_front(sig);
  Evict(sig);
  e.calls++;
  const bool debug = Env().debug >= 1;
  if (e.calls > 1 && !e.plain_only && e.tree && !e.tree->empty()) {
    ASSIGN_OR_RETURN(jit_internal::CaptureTree::Replayed rp, e.tree->Replay(prepared, bufs));
    if (rp.hit) {
      e.hits++;
      stats_.replays++;
      if (rp.parallel) stats_.parallel_replays++;
      e.kernels = rp.kernels;
      e.flops = rp.flops;
      e.bytes = rp.bytes;
      return Result{std::move(rp.outputs), Path::kReplay, rp.kernels, rp.flops, rp.bytes};
    }
    // A read found bytes no recorded path read: what ran so far is wasted,
    // and the call runs (and records) from the start.
    e.misses++;
    stats_.misses++;
    if (e.misses >= 4 && e.misses > 2 * e.hits) {
      e.plain_only = true;
      if (debug)
        std::fprintf(stderr, "jit: %s: %llu of %llu replays missed; running it plainly\n",
                     sig.c_str(), static_cast<unsigned long long>(e.misses),
                     static_cast<unsigned long long>(e.hits + e.misses));
    }
  }
  bool record = e.calls > 1 && !e.plain_only &&
                (!e.tree || e.tree->leaves() < options_.max_paths);
  if (!record) {
    stats_.plain_runs++;
    return RunPlain(prepared, nullptr);
  }
  // Record: a plain run whose kernels and reads join the capture tree.
  jit_internal::Recording rec;
  ASSIGN_OR_RETURN(Result r, RunPlain(prepared, &rec));
  if (!e.tree)
    e.tree = std::make_unique<jit_internal::CaptureTree>(prepared.empty() ? r.outputs[0].engine()
                                                                          : prepared[0].engine(),
                                                         prepared.empty() ? r.outputs[0].device()
                                                                          : prepared[0].device());
  size_t reads = rec.reads.size();
  absl::Status added = e.tree->Add(std::move(rec), bufs, &r.outputs, options_.use_graphs);
  const size_t held = added.ok() ? e.tree->held_bytes() : 0;
  if (added.ok() && held > options_.max_capture_bytes) {
    // Replays would keep more than the whole bound alive: the plain result
    // stands, and the signature runs plainly from now on.
    stats_.too_big++;
    stats_.plain_runs++;
    e.plain_only = true;
    e.tree.reset();
    if (debug)
      std::fprintf(stderr, "jit: %s not kept: its capture holds %zu bytes, over %zu\n",
                   sig.c_str(), held, options_.max_capture_bytes);
  } else if (added.ok()) {
    r.path = Path::kCapture;
    stats_.captures++;
    e.kernels = r.kernels;
    e.flops = r.flops;
    e.bytes = r.bytes;
    e.held_bytes = held;
    if (debug)
      std::fprintf(stderr,
                   "jit: captured %zu kernels, %zu host reads for %s (%.3g GFLOP, %.3g MB moved, "
                   "%.3g MB held)\n",
                   r.kernels, reads, sig.c_str(), r.flops * 1e-9, r.bytes * 1e-6, held * 1e-6);
    Evict(sig);
  } else {
    // The plain result stands; this signature is not captured.
    stats_.plain_runs++;
    e.plain_only = true;
    if (debug) std::fprintf(stderr, "jit: %s not captured: %s\n", sig.c_str(),
                            std::string(added.message()).c_str());
  }
  return r;
}

void Jit::Evict(const std::string& keep) {
  size_t held = 0;
  for (const auto& [sig, e] : entries_) held += e->held_bytes;
  auto victim = lru_.end();
  while (lru_.size() > options_.max_captures || held > options_.max_capture_bytes) {
    if (victim == lru_.begin()) break;  // only `keep` is left
    --victim;
    if (*victim == keep) continue;
    auto it = entries_.find(*victim);
    held -= it->second->held_bytes;
    if (it->second->tree && !it->second->tree->empty()) stats_.evictions++;
    entries_.erase(it);
    victim = lru_.erase(victim);
  }
}

absl::StatusOr<std::vector<Tensor>> Jit::operator()(const std::vector<Tensor>& inputs) {
  ASSIGN_OR_RETURN(Result r, Call(inputs));
  return std::move(r.outputs);
}

std::vector<Jit::CaptureInfo> Jit::captures() const {
  absl::MutexLock l(&mu_);
  std::vector<CaptureInfo> out;
  for (const auto& [sig, e] : entries_) {
    if (!e->tree || e->tree->empty()) continue;
    out.push_back({sig, e->tree->leaves(), e->kernels, e->flops, e->bytes, e->hits, e->misses,
                   e->held_bytes});
  }
  return out;
}

Jit::Stats Jit::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

}  // namespace kiln
