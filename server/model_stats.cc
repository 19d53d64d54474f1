#include "server/model_stats.h"

namespace kiln {
namespace {

void Put(uint64_t count, uint64_t ns, inference::StatisticDuration* d) {
  d->set_count(count);
  d->set_ns(ns);
}

}  // namespace

void ModelStats::RecordSuccess(uint64_t total_ns, const RequestTimings& t, uint64_t now_ms) {
  absl::MutexLock l(&mu_);
  success_.Add(total_ns);
  queue_.Add(t.queue_ns);
  input_.Add(t.compute_input_ns);
  infer_.Add(t.compute_infer_ns);
  output_.Add(t.compute_output_ns);
  last_inference_ms_ = now_ms;
}

void ModelStats::RecordFailure(uint64_t total_ns, uint64_t now_ms) {
  absl::MutexLock l(&mu_);
  fail_.Add(total_ns);
  last_inference_ms_ = now_ms;
}

void ModelStats::RecordExecution(int64_t batch_size, int64_t real_rows, uint64_t input_ns,
                                 uint64_t infer_ns, uint64_t output_ns) {
  absl::MutexLock l(&mu_);
  ++execution_count_;
  inference_count_ += static_cast<uint64_t>(real_rows);
  Batch& b = batches_[batch_size];
  b.input.Add(input_ns);
  b.infer.Add(infer_ns);
  b.output.Add(output_ns);
}

void ModelStats::Fill(inference::ModelStatistics* out) const {
  absl::MutexLock l(&mu_);
  out->set_last_inference(last_inference_ms_);
  out->set_inference_count(inference_count_);
  out->set_execution_count(execution_count_);
  auto* s = out->mutable_inference_stats();
  Put(success_.count, success_.ns, s->mutable_success());
  Put(fail_.count, fail_.ns, s->mutable_fail());
  Put(queue_.count, queue_.ns, s->mutable_queue());
  Put(input_.count, input_.ns, s->mutable_compute_input());
  Put(infer_.count, infer_.ns, s->mutable_compute_infer());
  Put(output_.count, output_.ns, s->mutable_compute_output());
  s->mutable_cache_hit();
  s->mutable_cache_miss();
  for (const auto& [size, b] : batches_) {
    auto* bs = out->add_batch_stats();
    bs->set_batch_size(static_cast<uint64_t>(size));
    Put(b.input.count, b.input.ns, bs->mutable_compute_input());
    Put(b.infer.count, b.infer.ns, bs->mutable_compute_infer());
    Put(b.output.count, b.output.ns, bs->mutable_compute_output());
  }
}

}  // namespace kiln
