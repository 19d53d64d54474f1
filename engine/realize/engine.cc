#include "engine/realize/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "engine/base/flags.h"
#include "engine/base/status.h"
#include "engine/codegen/lowerer.h"
#include "engine/codegen/matmul_match.h"
#include "engine/realize/beam.h"
#include "engine/renderer/cuda_wmma.h"
#include "engine/renderer/renderer.h"
#include "engine/uop/buffer.h"

namespace kiln {
namespace {

thread_local CaptureScope* current_capture = nullptr;

// Bytes each parameter's views can reach (for cost estimates).
std::vector<int64_t> ParamExtents(const UOpRef& ast, int num_bufs) {
  std::vector<int64_t> ext(num_bufs, 0);
  for (const UOp* u : Toposort(ast)) {
    if (u->op() != Op::kLoad && u->op() != Op::kStore) continue;
    int p = static_cast<int>(u->src(0)->arg().Int());
    if (p >= num_bufs) continue;
    int64_t sz = StOf(*u)->RealSize() * u->src(0)->dtype().ScalarSize();
    ext[p] = std::max(ext[p], sz);
  }
  return ext;
}

// Kernels are rendered under this name, then renamed (Engine::Prepare).
constexpr char kNamePlaceholder[] = "KILN_KERNEL_NAME_PLACEHOLDER";

// A 64-bit FNV-1a hash of `source`: stable across processes and builds,
// unlike std::hash.
uint64_t SourceHash(const std::string& source) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : source) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The highest buffer parameter number of a kernel AST.
int MaxParam(const UOpRef& ast) {
  int p = 0;
  for (const UOp* u : Toposort(ast))
    if (u->op() == Op::kDefineGlobal) p = std::max(p, static_cast<int>(u->arg().Int()));
  return p;
}

// The spec of a kernel that goes to tensor cores, or nullopt.
std::optional<MatmulSpec> TensorCoreMatmul(const Kernel& k, const RendererOptions& ropts) {
  if (!ropts.tensor_cores) return std::nullopt;
  std::optional<MatmulSpec> mm = MatchMatmul(k);
  if (mm && !WmmaSupported(*mm, ropts.sm)) mm.reset();
  return mm;
}

// Bytes of the device memory of a BUFFER UOp (saturating: a size the device
// could never hold stays too large instead of wrapping around).
size_t BufferBytes(const UOp& buffer) {
  const int64_t n = BufferOf(buffer).size();
  const size_t item = static_cast<size_t>(buffer.dtype().ItemSize());
  if (n <= 0) return 0;
  if (static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / std::max<size_t>(item, 1))
    return std::numeric_limits<size_t>::max();
  return static_cast<size_t>(n) * item;
}

// Bytes of device memory that running `sched` newly allocates: its buffers
// (kernel operands and outputs, each once) that hold no memory yet.
size_t PlannedBytes(const Schedule& sched) {
  std::unordered_set<const UOp*> seen;
  size_t total = 0;
  auto add = [&](const UOpRef& b) {
    if (!seen.insert(b.get()).second) return;
    std::shared_ptr<void> s = BufferOf(*b).storage();
    if (s != nullptr && static_cast<const Buffer*>(s.get())->allocated()) return;
    total += std::min(BufferBytes(*b), std::numeric_limits<size_t>::max() - total);
  };
  for (const ScheduleItem& item : sched.items)
    for (const UOpRef& b : item.bufs) add(b);
  for (const UOpRef& b : sched.outputs) add(b);
  return total;
}

}  // namespace

CaptureScope::CaptureScope() : prev_(current_capture) { current_capture = this; }
CaptureScope::~CaptureScope() { current_capture = prev_; }
CaptureScope* CaptureScope::Current() { return current_capture; }

std::string DebugLine(const CompiledKernel& k, double seconds) {
  double us = seconds * 1e6;
  return absl::StrFormat("kernel %-28s global=(%d,%d,%d) %9.2f us %8.2f GFLOP/s %8.2f GB/s",
                         k.name, k.dims.global[0], k.dims.global[1], k.dims.global[2], us,
                         seconds > 0 ? k.flops / seconds * 1e-9 : 0.0,
                         seconds > 0 ? k.bytes / seconds * 1e-9 : 0.0);
}

absl::Status ExecItem::Run(double* seconds) const {
  std::vector<void*> ptrs;
  ptrs.reserve(bufs.size());
  for (const BufferRef& b : bufs) {
    ASSIGN_OR_RETURN(void* p, b->Ptr());
    ptrs.push_back(p);
  }
  int debug = Env().debug;
  bool timed = seconds != nullptr || debug >= 2;
  double t = 0;
  RETURN_IF_ERROR(kernel->program->Launch(ptrs, vars, kernel->dims, timed, timed ? &t : nullptr));
  if (seconds) *seconds = t;
  if (debug >= 2) std::fprintf(stderr, "%s\n", DebugLine(*kernel, t).c_str());
  if (CaptureScope* c = CaptureScope::Current()) c->Add(*this);
  return absl::OkStatus();
}

Engine::Engine(DeviceRegistry* registry, EngineOptions options)
    : registry_(registry), options_(options) {}

Engine::~Engine() = default;

absl::StatusOr<Device*> Engine::GetDevice(const std::string& name) { return registry_->Get(name); }

namespace {

// What the engine knows of each renderer language (Device::renderer()): how
// kernels are rendered and the codegen options its devices start from.
struct RendererEntry {
  const char* name;
  std::string (*render)(const std::string& name, const UOpList& uops);
  bool gpu;                  // one scalar thread per output; else vector code
  int vector_bytes;          // CPU: the vector width used everywhere
  bool wide_register_tiles;  // CPU: 512-bit tiles where the host has AVX-512
  bool tensor_cores;         // CUDA: WMMA kernels on sm_70+
};

// {name, render, gpu, vector_bytes, wide_register_tiles, tensor_cores}
constexpr RendererEntry kRenderers[] = {
    {"c", RenderC, false, 32, true, false},
    {"bytecode", RenderBytecode, false, 32, false, false},
    {"opencl", RenderOpenCL, true, 0, false, false},
    {"cuda", RenderCuda, true, 0, false, true},
};

const RendererEntry* FindRenderer(const std::string& name) {
  for (const RendererEntry& r : kRenderers)
    if (name == r.name) return &r;
  return nullptr;
}

}  // namespace

absl::StatusOr<RendererOptions> CodegenOptions(const std::string& renderer,
                                               const std::string& device, int sm) {
  const RendererEntry* r = FindRenderer(renderer);
  if (r == nullptr)
    return absl::UnimplementedError(absl::StrCat("no codegen for renderer '", renderer, "'"));
  RendererOptions o;
  o.device = device;
  o.gpu = r->gpu;
  o.vector_bytes = r->vector_bytes;
  if (r->gpu) {
    // Scalar code per thread; blocks of up to 256 threads (see kernel_gpu.cc).
    o.max_local_threads = 1024;
    o.preferred_local_threads = 256;
  }
  if (r->wide_register_tiles) {
    // The C kernels are compiled for the host (-march=native): with AVX-512
    // (32 registers of 64 bytes), matmul-like kernels take 512-bit tiles.
    // KILN_AVX512=0 keeps them at 256 bits; =1 forces 512-bit tiles on any
    // host (correct everywhere, fast only with AVX-512; used by tests).
    bool avx512 = false;
#if defined(__x86_64__)
    avx512 = __builtin_cpu_supports("avx512f");
#endif
    int64_t force = GetEnvInt("KILN_AVX512", -1);
    if (force == 1 || (force != 0 && avx512)) {
      o.wide_vector_bytes = 64;
      o.vector_registers = 32;
    }
  }
  if (r->tensor_cores) {
    // WMMA needs sm_70 (Volta); KILN_WMMA=0 keeps every kernel scalar.
    o.sm = sm;
    o.tensor_cores = sm >= 70 && GetEnvInt("KILN_WMMA", 1) != 0;
  }
  return o;
}

absl::StatusOr<std::string> RenderKernel(const std::string& renderer, const std::string& name,
                                         const UOpList& uops) {
  const RendererEntry* r = FindRenderer(renderer);
  if (r == nullptr)
    return absl::UnimplementedError(absl::StrCat("no renderer for '", renderer, "'"));
  return r->render(name, uops);
}

absl::StatusOr<RendererOptions> Engine::OptionsFor(Device* device) const {
  ASSIGN_OR_RETURN(RendererOptions o, CodegenOptions(device->renderer(), device->name(),
                                                     device->compute_capability()));
  if (!o.gpu) o.cpu_threads = std::max(1, device->workers());
  return o;
}

absl::StatusOr<BufferRef> Engine::StorageOf(const UOpRef& buffer) {
  const BufferArg& b = BufferOf(*buffer);
  if (std::shared_ptr<void> s = b.storage()) return std::static_pointer_cast<Buffer>(s);
  ASSIGN_OR_RETURN(Device * dev, registry_->Get(b.device()));
  ASSIGN_OR_RETURN(BufferRef buf, dev->NewBuffer(BufferBytes(*buffer)));
  b.set_storage(buf);
  return buf;
}

absl::StatusOr<Engine::Prepared> Engine::Prepare(Device* device, const UOpRef& ast,
                                                 const RendererOptions& ropts, bool optimize) {
  const std::string lang = device->renderer();
  ASSIGN_OR_RETURN(Kernel k, Kernel::Create(ast, ropts));
  // A plain fp16 / bf16 matmul on a CUDA GPU with tensor cores skips the
  // optimize / lower / render path for a WMMA kernel (engine/renderer/cuda_wmma.h).
  std::optional<MatmulSpec> mm;
  if (optimize) mm = TensorCoreMatmul(k, ropts);
  Prepared p;
  LinearProgram& prog = p.prog;
  if (mm) {
    prog.name = absl::StrCat("wmma_", k.Name());
    prog.num_bufs = mm->num_bufs;
    prog.opts = {"WMMA"};
  } else {
    if (optimize) {
      HeuristicKnobs knobs;
      const int beam = options_.beam >= 0 ? options_.beam : Env().beam;
      if (beam > 0 && lang == "c" && k.reduce() != nullptr) {
        // BEAM=N: time variants of the heuristics' choices (engine/realize/beam.h).
        ASSIGN_OR_RETURN(BeamResult b, BeamSearch(ast, ropts, device,
                                                  ParamExtents(ast, MaxParam(ast) + 1), beam));
        knobs = b.knobs;
        {
          absl::MutexLock l(&mu_);
          stats_.beam_searches++;
        }
        if (Env().debug >= 1 && !b.cached)
          std::fprintf(stderr, "beam %s: %d variants, %.1f us -> %.1f us (%s)\n", k.Name().c_str(),
                       b.variants, b.default_seconds * 1e6, b.best_seconds * 1e6,
                       b.knobs.ToString().c_str());
      }
      k.HandCodedOptimizations(knobs);
    }
    ASSIGN_OR_RETURN(prog, Lower(k));
    EstimateCosts(&prog, ParamExtents(ast, prog.num_bufs));
    if (!optimize) prog.opts = {"UNOPTIMIZED (fallback)"};
  }
  // The kernel is rendered under a placeholder name. Its function is named
  // by a hash of that source alone, so kernels that differ only in their
  // heuristic name (a size that reaches the code as the launch range: a
  // LayerNorm over 100 or 104 rows) are one source, one disk-cache entry
  // and one compile (a new sequence length of the BERT-style encoder with
  // the divisibility of one already run compiles 17 of its 31 kernels).
  // The name shown (DEBUG, metrics) is the heuristic name plus a short form
  // of the same hash: the same kernel gets the same names in every process
  // and after an eviction.
  if (mm) {
    WmmaKernel w = RenderWmma(kNamePlaceholder, *mm);
    prog.global = w.global;
    prog.local = w.local;
    prog.flops = w.flops;
    prog.bytes = w.bytes;
    p.source = std::move(w.source);
  } else {
    ASSIGN_OR_RETURN(p.source, RenderKernel(lang, kNamePlaceholder, prog.uops));
  }
  const uint64_t hash = SourceHash(p.source);
  prog.name = absl::StrCat(prog.name, "_",
                           absl::StrFormat("%08x", static_cast<uint32_t>(hash ^ (hash >> 32))));
  p.symbol = absl::StrFormat("k_%016x", hash);
  p.source = absl::StrReplaceAll(p.source, {{kNamePlaceholder, p.symbol}});
  if (Env().debug >= 4)
    std::fprintf(stderr, "// kernel %s\n%s\n", prog.name.c_str(), p.source.c_str());
  return p;
}

absl::StatusOr<std::vector<std::string>> Engine::CompileWithFallback(
    Device* device, const UOpList& asts, const RendererOptions& ropts,
    std::vector<Prepared>* pending) {
  std::vector<std::string> sources;
  for (const Prepared& p : *pending) sources.push_back(p.source);
  absl::StatusOr<std::vector<std::string>> bins = device->compiler().CompileMany(sources);
  if (bins.ok() || !absl::IsInvalidArgument(bins.status())) return bins;
  // The device compiler rejected (or crashed on) some kernel: compile them
  // one by one, and lower each one that fails again without optimizations,
  // so that one compiler bug costs that kernel's speed, not the model.
  std::vector<std::string> out(pending->size());
  for (size_t j = 0; j < pending->size(); ++j) {
    Prepared& p = (*pending)[j];
    absl::StatusOr<std::string> bin = device->compiler().Compile(p.source);
    if (!bin.ok() && absl::IsInvalidArgument(bin.status())) {
      absl::StatusOr<Prepared> plain = Prepare(device, asts[p.index], ropts, /*optimize=*/false);
      absl::StatusOr<std::string> plain_bin =
          plain.ok() ? device->compiler().Compile(plain->source) : plain.status();
      if (!plain_bin.ok()) return bin.status();  // the optimized kernel's error
      std::string why(bin.status().message().substr(0, 300));
      std::replace(why.begin(), why.end(), '\n', ' ');
      std::fprintf(stderr, "kiln: kernel %s did not compile (%s); running it unoptimized as %s\n",
                   p.prog.name.c_str(), why.c_str(), plain->prog.name.c_str());
      plain->index = p.index;
      p = std::move(*plain);
      bin = std::move(plain_bin);
    }
    if (!bin.ok()) return bin.status();
    out[j] = std::move(*bin);
  }
  return out;
}

absl::StatusOr<std::vector<std::shared_ptr<const CompiledKernel>>> Engine::GetKernels(
    Device* device, const UOpList& asts) {
  std::vector<std::shared_ptr<const CompiledKernel>> out(asts.size());
  {
    absl::MutexLock l(&mu_);
    for (size_t i = 0; i < asts.size(); ++i) {
      auto it = cache_.find({device, asts[i].get()});
      if (it != cache_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        out[i] = it->second->kernel;
        stats_.kernel_cache_hits++;
      }
    }
  }
  ASSIGN_OR_RETURN(RendererOptions ropts, OptionsFor(device));
  std::vector<Prepared> pending;
  std::map<const UOp*, size_t> seen;  // identical ASTs in one batch compile once
  for (size_t i = 0; i < asts.size(); ++i) {
    if (out[i] || seen.count(asts[i].get())) continue;
    seen[asts[i].get()] = i;
    ASSIGN_OR_RETURN(Prepared p, Prepare(device, asts[i], ropts, /*optimize=*/true));
    p.index = i;
    pending.push_back(std::move(p));
  }
  if (!pending.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(std::vector<std::string> bins,
                     CompileWithFallback(device, asts, ropts, &pending));
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    absl::MutexLock l(&mu_);
    stats_.compile_seconds += secs;
    for (size_t j = 0; j < pending.size(); ++j) {
      Prepared& p = pending[j];
      auto ck = std::make_shared<CompiledKernel>();
      ck->name = p.prog.name;
      ck->symbol = p.symbol;
      ck->source = p.source;
      ck->dims.global = p.prog.global;
      ck->dims.local = p.prog.local;
      // Tiny kernels run inline: waking threads costs more than they do.
      // (At 32 KiB, 2 threads ran MobileNetV2 / MnasNet / MobileNetV3 3-6%
      // and the GRU/LSTM model 19% slower than at 4 KiB: a kernel of a few
      // microseconds still gains from the second core.)
      ck->dims.single_thread = p.prog.flops + p.prog.bytes < 4096;
      ck->num_bufs = p.prog.num_bufs;
      ck->vars = p.prog.vars;
      ck->flops = p.prog.flops;
      ck->bytes = p.prog.bytes;
      ck->opts = p.prog.opts;
      ASSIGN_OR_RETURN(ck->program, device->LoadProgram(ck->symbol, bins[j]));
      if (Env().debug >= 3)
        std::fprintf(stderr, "compiled %s opts=[%s]\n", ck->name.c_str(),
                     absl::StrJoin(ck->opts, ", ").c_str());
      lru_.push_front({asts[p.index], ck});
      cache_[{device, asts[p.index].get()}] = lru_.begin();
      stats_.kernels_compiled++;
      out[p.index] = ck;
      while (lru_.size() > options_.kernel_cache_entries) {
        cache_.erase({device, lru_.back().ast.get()});
        lru_.pop_back();
      }
    }
  }
  for (size_t i = 0; i < asts.size(); ++i)
    if (!out[i]) out[i] = out[seen.at(asts[i].get())];
  return out;
}

absl::Status Engine::RealizeInto(const UOpRef& root, const ScheduleTarget& target,
                                 const std::string& device) {
  return Run({root}, device, &target).status();
}

absl::StatusOr<UOpList> Engine::Realize(const UOpList& roots, const std::string& device_name) {
  return Run(roots, device_name, nullptr);
}

absl::StatusOr<UOpList> Engine::Run(const UOpList& roots, const std::string& device_name,
                                    const ScheduleTarget* target) {
  ASSIGN_OR_RETURN(Device * device, registry_->Get(device_name));
  ASSIGN_OR_RETURN(Schedule sched, CreateSchedule(roots, device->name(), target));
  // Refused before anything is compiled or allocated when its new buffers
  // do not fit under the device's memory limit.
  RETURN_IF_ERROR(device->allocator().CheckRoom(
      PlannedBytes(sched), absl::StrCat("running ", sched.items.size(), " kernels on ",
                                        device->name(), " needs new buffers")));
  UOpList asts;
  for (const ScheduleItem& it : sched.items) asts.push_back(it.ast);
  ASSIGN_OR_RETURN(auto kernels, GetKernels(device, asts));
  double flops = 0, bytes = 0;
  for (size_t i = 0; i < sched.items.size(); ++i) {
    ExecItem e;
    e.kernel = kernels[i];
    for (const UOpRef& b : sched.items[i].bufs) {
      ASSIGN_OR_RETURN(BufferRef rb, StorageOf(b));
      e.bufs.push_back(std::move(rb));
    }
    if (static_cast<int>(e.bufs.size()) < e.kernel->num_bufs)
      return absl::InternalError(absl::StrCat("kernel ", e.kernel->name, " wants ",
                                              e.kernel->num_bufs, " buffers"));
    for (const std::string& v : e.kernel->vars) {
      auto it = std::find_if(sched.items[i].var_vals.begin(), sched.items[i].var_vals.end(),
                             [&](const auto& kv) { return kv.first == v; });
      if (it == sched.items[i].var_vals.end())
        return absl::InternalError(absl::StrCat("kernel ", e.kernel->name, ": variable ", v,
                                                " is not bound"));
      e.vars.push_back(it->second);
    }
    RETURN_IF_ERROR(e.Run());
    flops += e.kernel->flops;
    bytes += e.kernel->bytes;
  }
  for (const UOpRef& out : sched.outputs) RETURN_IF_ERROR(StorageOf(out).status());
  absl::MutexLock l(&mu_);
  stats_.kernels_run += sched.items.size();
  stats_.flops_run += flops;
  stats_.bytes_run += bytes;
  return sched.outputs;
}

EngineStats Engine::stats() const {
  absl::MutexLock l(&mu_);
  return stats_;
}

}  // namespace kiln
