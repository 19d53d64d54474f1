#include "engine/jit/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "engine/jit/capture.h"

namespace kiln::jit_internal {
namespace {

// A buffer a kernel touches: {kBuffer, a Buffer the capture holds}, or
// {kInput, i} / {kOutput, o}: the caller's input i, the replay's output o
// (their slots hold no buffer).
enum RegionKind { kBuffer, kInput, kOutput };
using Region = std::pair<RegionKind, uintptr_t>;

// Estimated seconds of a kernel on one core: its FLOPs at 100 GFLOP/s or
// its bytes at 20 GB/s, whichever is longer (only the ratios matter), and
// at least a launch.
double Cost(const ExecItem& e) {
  return std::max({e.kernel->flops / 100e9, e.kernel->bytes / 20e9, 1e-7});
}

}  // namespace

ParallelPlan::ParallelPlan(const Node& node, int workers) : workers_(workers) {
  const size_t n = node.items.size();
  succ_.assign(n, {});
  npred_.assign(n, 0);
  if (workers < 2 || n < 2) return;
  // Which slots are the caller's inputs or the replay's outputs.
  std::map<std::pair<size_t, size_t>, Region> patched;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    for (const Slot& s : node.inputs[i])
      patched[{s.item, s.pos}] = {kInput, i};
  for (size_t o = 0; o < node.outputs.size(); ++o)
    for (const Slot& s : node.outputs[o].slots)
      patched[{s.item, s.pos}] = {kOutput, o};
  struct Use {
    int writer = -1;
    std::vector<int> readers;  // since the last write
  };
  std::map<Region, Use> uses;
  std::vector<double> finish(n, 0);  // the longest chain ending with item k
  double total = 0, critical = 0;
  for (size_t k = 0; k < n; ++k) {
    const ExecItem& e = node.items[k];
    std::vector<int> preds;
    for (size_t p = 0; p < e.bufs.size(); ++p) {
      auto it = patched.find({k, p});
      const Region r = it != patched.end()
                           ? it->second
                           : Region{kBuffer, reinterpret_cast<uintptr_t>(e.bufs[p].get())};
      Use& u = uses[r];
      if (u.writer >= 0) preds.push_back(u.writer);
      if (p == 0) {  // written: after its readers too
        preds.insert(preds.end(), u.readers.begin(), u.readers.end());
        u.writer = static_cast<int>(k);
        u.readers.clear();
      } else {
        u.readers.push_back(static_cast<int>(k));
      }
    }
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    double start = 0;
    for (int q : preds) {
      if (q == static_cast<int>(k)) continue;  // reads what it writes
      succ_[q].push_back(static_cast<int>(k));
      ++npred_[k];
      start = std::max(start, finish[q]);
    }
    const double c = Cost(e);
    finish[k] = start + c;
    total += c;
    critical = std::max(critical, finish[k]);
  }
  share_ = total > 0 ? critical / total : 1;
  parallel_ = critical * workers <= kParallelSlack * total;
}

absl::Status ParallelPlan::Run(Device* dev, const Node& node, bool debug) const {
  const size_t n = node.items.size();
  std::unique_ptr<std::atomic<int>[]> waiting(new std::atomic<int>[n]);
  std::deque<int> ready;
  for (size_t k = 0; k < n; ++k) {
    waiting[k].store(npred_[k], std::memory_order_relaxed);
    if (npred_[k] == 0) ready.push_back(static_cast<int>(k));
  }
  std::mutex mu;  // guards `ready` and `error`
  absl::Status error;
  std::atomic<size_t> done{0};
  std::atomic<bool> failed{false};
  dev->RunOnWorkers([&](int) {
    int k = -1;  // the next item of this worker's chain, if it has one
    while (done.load(std::memory_order_acquire) < n && !failed.load(std::memory_order_relaxed)) {
      if (k < 0) {
        std::lock_guard<std::mutex> lock(mu);
        if (!ready.empty()) {
          k = ready.front();
          ready.pop_front();
        }
      }
      if (k < 0) {  // the others run what this one waits for
        std::this_thread::yield();
        continue;
      }
      const ExecItem& e = node.items[k];
      double t = 0;
      absl::Status s = e.kernel->program->Launch(node.ptrs[k], e.vars, e.kernel->dims, debug,
                                                 debug ? &t : nullptr);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (error.ok()) error = s;
        failed.store(true);
        return;
      }
      if (debug) std::fprintf(stderr, "%s (jit)\n", DebugLine(*e.kernel, t).c_str());
      // Keep the first successor that became ready; share the rest.
      int next = -1;
      for (int s2 : succ_[k]) {
        if (waiting[s2].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
        if (next < 0) {
          next = s2;
        } else {
          std::lock_guard<std::mutex> lock(mu);
          ready.push_back(s2);
        }
      }
      done.fetch_add(1, std::memory_order_acq_rel);
      k = next;
    }
  });
  if (!error.ok()) return error;
  if (done.load() != n) return absl::InternalError("jit: a parallel replay left kernels unrun");
  return absl::OkStatus();
}

}  // namespace kiln::jit_internal
