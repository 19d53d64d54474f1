#include "server/executor.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"

namespace kiln {
namespace {

constexpr double kEwma = 0.2;

uint64_t Ns(absl::Duration d) {
  return d < absl::ZeroDuration() ? 0 : static_cast<uint64_t>(absl::ToInt64Nanoseconds(d));
}

void Ewma(double v, double* acc) { *acc = *acc == 0 ? v : (1 - kEwma) * *acc + kEwma * v; }

// A run of the backend; an exception (an allocation the engine did not
// check first, memory taken by others) fails this batch, not the process:
// the executor's worker thread would otherwise std::terminate kilnd.
absl::StatusOr<std::vector<OutputTensor>> RunGuarded(ModelRunner& runner,
                                                     const std::vector<InputTensor>& inputs,
                                                     RunStats* stats) {
  try {
    return runner.Run(inputs, stats);
  } catch (const std::bad_alloc& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory running the model (", e.what(), ")"));
  } catch (const std::length_error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory running the model (", e.what(), ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("running the model failed: ", e.what()));
  }
}

// Writes `n` deterministic pseudo-random elements of `t` (floats in [0, 1),
// integers in [0, 10), bools 0 / 1).
void FillRandom(DType t, int64_t n, uint64_t seed, std::string* out) {
  size_t item = t.ItemSize();
  out->assign(static_cast<size_t>(n) * item, '\0');
  uint64_t x = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    double u = static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53);
    char* p = out->data() + i * item;
    switch (t.scalar) {
      case ScalarType::kFloat32: { float f = static_cast<float>(u); std::memcpy(p, &f, 4); break; }
      case ScalarType::kFloat64: std::memcpy(p, &u, 8); break;
      case ScalarType::kFloat16: { uint16_t h = FloatToHalf(static_cast<float>(u)); std::memcpy(p, &h, 2); break; }
      case ScalarType::kBFloat16: { uint16_t h = FloatToBFloat16(static_cast<float>(u)); std::memcpy(p, &h, 2); break; }
      case ScalarType::kBool: *p = u < 0.5 ? 0 : 1; break;
      default: {
        int64_t v = static_cast<int64_t>(u * 10);
        std::memcpy(p, &v, item);  // little-endian: the low bytes
      }
    }
  }
}

}  // namespace

std::string ShapeKey(const std::vector<InputTensor>& inputs, bool batched) {
  std::string key;
  for (const InputTensor& in : inputs) {
    absl::StrAppend(&key, in.dtype.KServeName(), "[");
    for (size_t i = batched ? 1 : 0; i < in.shape.size(); ++i)
      absl::StrAppend(&key, i > (batched ? 1u : 0u) ? "," : "", in.shape[i]);
    absl::StrAppend(&key, "];");
  }
  return key;
}

Executor::Executor(const ModelSpec* spec, std::vector<std::unique_ptr<ModelRunner>> runners,
                   std::shared_ptr<ModelMetrics> metrics, ModelStats* stats, Clock* clock,
                   Options options)
    : spec_(spec), metrics_(std::move(metrics)), stats_(stats), clock_(clock), options_(options) {
  for (auto& r : runners) {
    auto inst = std::make_unique<Instance>();
    inst->runner = std::move(r);
    instances_.push_back(std::move(inst));
  }
}

Executor::Counts Executor::counts() const {
  absl::MutexLock l(&mu_);
  return counts_;
}

bool Executor::Captured(const Instance& inst, const KeyState& ks, int64_t rows) {
  std::vector<std::vector<int64_t>> shapes = ks.shapes;
  for (std::vector<int64_t>& shape : shapes)
    if (!shape.empty()) shape[0] = rows;
  return inst.runner->HasCapture(ks.dtypes, shapes);
}

std::vector<int64_t> Executor::CapturedSizes(int instance, const std::string& key) const {
  std::vector<int64_t> out;
  const Instance& inst = *instances_.at(instance);
  absl::MutexLock l(&inst.mu);
  auto it = inst.keys.find(key);
  if (it == inst.keys.end()) return out;
  for (const auto& [rows, spent] : it->second.pad_spent)
    if (Captured(inst, it->second, rows)) out.push_back(rows);
  return out;
}

int64_t Executor::ChooseRows(Instance& inst, const std::string& key, int64_t rows) {
  if (!options_.pad_to_captured || spec_->max_batch_size == 0) return rows;
  double miss, row;
  {
    absl::MutexLock l(&mu_);
    miss = miss_seconds_;
    row = row_seconds_;
  }
  if (miss <= 0 || row <= 0) return rows;
  absl::MutexLock l(&inst.mu);
  auto it = inst.keys.find(key);
  if (it == inst.keys.end()) return rows;
  KeyState& ks = it->second;
  if (Captured(inst, ks, rows)) return rows;
  // The smallest larger size run before that is captured now.
  for (auto s = ks.pad_spent.upper_bound(rows); s != ks.pad_spent.end(); ++s) {
    if (s->first > spec_->max_batch_size || !Captured(inst, ks, s->first)) continue;
    double waste = static_cast<double>(s->first - rows) * row;
    double& mine = ks.pad_spent[rows];
    if (mine + waste < 2 * miss) {
      mine += waste;
      return s->first;
    }
    return rows;
  }
  return rows;
}

absl::StatusOr<std::vector<OutputTensor>> Executor::RunCounted(
    Instance& inst, const std::string& key, int64_t rows, const std::vector<InputTensor>& inputs,
    RunStats* stats) {
  absl::Time start = clock_->Now();
  absl::StatusOr<std::vector<OutputTensor>> outs = RunGuarded(*inst.runner, inputs, stats);
  double seconds = absl::ToDoubleSeconds(clock_->Now() - start);
  if (!outs.ok()) return outs;
  bool replay = stats->path == RunStats::Path::kReplay;
  {
    absl::MutexLock l(&inst.mu);
    inst.lru.remove(key);
    inst.lru.push_front(key);
    KeyState& ks = inst.keys[key];
    if (ks.shapes.empty()) {
      for (const InputTensor& in : inputs) {
        ks.dtypes.push_back(in.dtype);
        ks.shapes.push_back(in.shape);
      }
    }
    ks.pad_spent.emplace(rows, 0.0);  // a size run once: a candidate to pad to
    while (inst.lru.size() > kKeysPerCapture * options_.max_captures) {
      inst.keys.erase(inst.lru.back());
      inst.lru.pop_back();
    }
  }
  {
    absl::MutexLock l(&mu_);
    if (replay) {
      ++counts_.hits;
      if (rows > 0) Ewma(seconds / static_cast<double>(rows), &row_seconds_);
    } else {
      ++counts_.misses;
      counts_.capture_seconds += seconds;
      if (stats->path == RunStats::Path::kCapture) ++counts_.captures;
      Ewma(seconds, &miss_seconds_);
    }
  }
  if (metrics_) {
    if (replay) {
      metrics_->jit_hits->Increment();
    } else {
      metrics_->jit_misses->Increment();
      metrics_->jit_capture_seconds->Increment(seconds);
      if (stats->path == RunStats::Path::kCapture) metrics_->jit_captures->Increment();
    }
    metrics_->flops->Increment(stats->flops);
    metrics_->bytes->Increment(stats->bytes);
    double infer_s = static_cast<double>(stats->infer_ns) * 1e-9;
    if (infer_s > 0 && stats->flops > 0) metrics_->flops_per_second->Set(stats->flops / infer_s);
  }
  return outs;
}

void Executor::CompleteAll(std::vector<RequestPtr>& batch, const absl::Status& s) {
  for (RequestPtr& r : batch) r->Complete(s);
}

void Executor::Execute(std::vector<RequestPtr> batch, int instance) {
  absl::Time start = clock_->Now();
  // Requests cancelled while queued are not run.
  std::vector<RequestPtr> live;
  for (RequestPtr& r : batch) {
    if (r->cancelled()) r->Complete(absl::CancelledError("request cancelled by the client"));
    else live.push_back(std::move(r));
  }
  if (live.empty()) return;
  if (instance < 0 || instance >= instances()) {
    CompleteAll(live, absl::InternalError("executor: no such instance"));
    return;
  }
  Instance& inst = *instances_[instance];
  const bool batched = spec_->max_batch_size > 0;
  int64_t rows = 0;
  for (const RequestPtr& r : live) rows += batched ? r->batch : 1;
  const std::string& key = live[0]->shape_key;
  const int64_t target = batched ? ChooseRows(inst, key, rows) : rows;

  // Inputs: the request's own bytes for a lone unpadded request, else the
  // requests' rows one after another plus zero rows of padding.
  std::vector<InputTensor> inputs;
  const size_t n_in = live[0]->inputs.size();
  if (live.size() == 1 && target == rows) {
    for (const InputTensor& src : live[0]->inputs) {
      InputTensor in;
      in.name = src.name;
      in.dtype = src.dtype;
      in.shape = src.shape;
      in.data = src.data;
      inputs.push_back(std::move(in));
    }
  } else {
    for (size_t i = 0; i < n_in; ++i) {
      const InputTensor& first = live[0]->inputs[i];
      size_t row_bytes = first.data.size() / static_cast<size_t>(std::max<int64_t>(1, live[0]->batch));
      InputTensor in;
      in.name = first.name;
      in.dtype = first.dtype;
      in.shape = first.shape;
      in.shape[0] = target;
      in.owned.reserve(row_bytes * static_cast<size_t>(target));
      for (const RequestPtr& r : live) in.owned.append(r->inputs[i].data);
      in.owned.resize(row_bytes * static_cast<size_t>(target), '\0');
      inputs.push_back(std::move(in));
    }
    for (InputTensor& in : inputs) in.data = in.owned;
  }
  absl::Time gathered = clock_->Now();

  RunStats stats;
  absl::StatusOr<std::vector<OutputTensor>> outs = RunCounted(inst, key, target, inputs, &stats);
  if (!outs.ok()) {
    CompleteAll(live, outs.status());
    return;
  }
  absl::Time split_start = clock_->Now();
  // Split every output by rows.
  std::vector<InferResult> results(live.size());
  // A lone request that was not padded takes the outputs whole (no copy).
  const bool whole = live.size() == 1 && target == rows;
  for (OutputTensor& out : *outs) {
    size_t row_bytes = out.data.size();
    if (batched) {
      if (out.shape.empty() || out.shape[0] != target) {
        CompleteAll(live, absl::InternalError(absl::StrCat(
                              "model output '", out.name, "' has first dim ",
                              out.shape.empty() ? 0 : out.shape[0], ", expected the batch size ",
                              target)));
        return;
      }
      row_bytes = target > 0 ? out.data.size() / static_cast<size_t>(target) : 0;
    }
    size_t offset = 0;
    for (size_t k = 0; k < live.size(); ++k) {
      const InferRequest& r = *live[k];
      int64_t n = batched ? r.batch : 1;
      bool wanted = std::find(r.outputs.begin(), r.outputs.end(), out.name) != r.outputs.end();
      if (wanted) {
        OutputTensor o;
        o.name = out.name;
        o.dtype = out.dtype;
        o.shape = out.shape;
        if (whole) {
          o.data = std::move(out.data);
        } else if (batched) {
          o.shape[0] = n;
          o.data = out.data.substr(offset, row_bytes * static_cast<size_t>(n));
        } else {
          o.data = out.data;
        }
        results[k].outputs.push_back(std::move(o));
      }
      if (batched) offset += row_bytes * static_cast<size_t>(n);
    }
  }
  absl::Time end = clock_->Now();
  uint64_t input_ns = Ns(gathered - start) + stats.input_ns;
  uint64_t output_ns = Ns(end - split_start) + stats.output_ns;
  // Statistics first: a client that got its answer must see it counted.
  if (stats_) stats_->RecordExecution(target, rows, input_ns, stats.infer_ns, output_ns);
  if (target > rows) {
    absl::MutexLock l(&mu_);
    ++counts_.padded_batches;
    counts_.padded_rows += static_cast<uint64_t>(target - rows);
  }
  if (metrics_) {
    metrics_->executions->Increment();
    metrics_->inferences->Increment(static_cast<double>(rows));
    metrics_->batch_size->Observe(static_cast<double>(target));
    if (target > rows) metrics_->padded_rows->Increment(static_cast<double>(target - rows));
    metrics_->compute_input->Observe(static_cast<double>(input_ns) * 1e-9);
    metrics_->compute_infer->Observe(static_cast<double>(stats.infer_ns) * 1e-9);
    metrics_->compute_output->Observe(static_cast<double>(output_ns) * 1e-9);
  }
  for (size_t k = 0; k < live.size(); ++k) {
    InferRequest& r = *live[k];
    // Outputs in the order the request asked for them.
    std::vector<OutputTensor> ordered;
    for (const std::string& name : r.outputs)
      for (OutputTensor& o : results[k].outputs)
        if (o.name == name) ordered.push_back(std::move(o));
    if (ordered.size() != r.outputs.size()) {
      r.Complete(absl::InternalError("the model did not produce every requested output"));
      continue;
    }
    results[k].outputs = std::move(ordered);
    RequestTimings& t = results[k].timings;
    t.queue_ns = Ns(start - r.arrival);
    t.compute_input_ns = input_ns;
    t.compute_infer_ns = stats.infer_ns;
    t.compute_output_ns = output_ns;
    t.batch_size = target;
    if (metrics_) metrics_->queue_duration->Observe(static_cast<double>(t.queue_ns) * 1e-9);
    r.Complete(std::move(results[k]));
  }
}

absl::Status Executor::Warmup() {
  const bool batched = spec_->max_batch_size > 0;
  for (const WarmupSpec& w : spec_->warmups) {
    std::vector<InputTensor> inputs;
    uint64_t seed = 1;
    for (const TensorSpec& t : spec_->inputs) {
      const WarmupInput& wi = w.inputs.at(t.name);  // checked by CompleteSpecFromModel
      InputTensor in;
      in.name = t.name;
      in.dtype = t.dtype;
      in.shape = wi.dims;
      if (batched) in.shape.insert(in.shape.begin(), w.batch_size);
      std::optional<int64_t> n = CheckedNumel(in.shape);
      if (!n || *n > (int64_t{1} << 28))
        return absl::InvalidArgumentError(absl::StrCat("warm-up '", w.name, "' is too large"));
      if (wi.random) FillRandom(t.dtype, *n, seed++, &in.owned);
      else in.owned.assign(static_cast<size_t>(*n) * t.dtype.ItemSize(), '\0');
      inputs.push_back(std::move(in));
    }
    for (InputTensor& in : inputs) in.data = in.owned;
    std::string key = ShapeKey(inputs, batched);
    for (auto& inst : instances_) {
      for (int i = 0; i < std::max(2, w.count); ++i) {
        RunStats stats;
        auto outs = RunCounted(*inst, key, batched ? w.batch_size : 1, inputs, &stats);
        if (!outs.ok())
          return absl::Status(outs.status().code(),
                              absl::StrCat("warm-up '", w.name, "': ", outs.status().message()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln
