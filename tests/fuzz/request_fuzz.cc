// libFuzzer target: the request path of kilnd's ModelInfer after the model
// lookup. The bytes are a serialized inference.ModelInferRequest, as gRPC
// hands it to the service; when they parse, the request goes through
// DecodeInferRequest (server/infer_codec.h) against two fixed models
// (fuzz_util.h: one batching, one not), and a request it accepts is queued
// and taken out again by the batcher's BatchQueue, then answered by
// EncodeInferResponse, as the server would.
//
// Nothing may crash, abort or allocate more than the request carries; on
// top of that the decoder's contract is checked (FUZZ_CHECK): an accepted
// request has every input in the model's order, of the model's dtype and
// rank, with exactly numel * itemsize bytes of data that can be read.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "proto/grpc_service.pb.h"
#include "server/batch_queue.h"
#include "server/infer_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace kiln::fuzz {
namespace {

// Reads every byte of `data` (ASan reports data that points nowhere).
uint32_t Touch(std::string_view data) {
  uint32_t sum = 0;
  for (unsigned char c : data) sum = sum * 31 + c;
  return sum;
}

void CheckDecoded(const ModelSpec& spec, const InferRequest& r) {
  const bool batched = spec.max_batch_size > 0;
  FUZZ_CHECK(r.inputs.size() == spec.inputs.size());
  FUZZ_CHECK(r.batch >= 1 && (!batched || r.batch <= spec.max_batch_size));
  for (size_t k = 0; k < r.inputs.size(); ++k) {
    const InputTensor& in = r.inputs[k];
    const TensorSpec& t = spec.inputs[k];
    FUZZ_CHECK(in.name == t.name);
    FUZZ_CHECK(in.dtype == t.dtype);
    FUZZ_CHECK(in.shape.size() == t.dims.size() + (batched ? 1 : 0));
    if (batched) FUZZ_CHECK(in.shape[0] == r.batch);
    std::optional<int64_t> numel = CheckedNumel(in.shape);
    FUZZ_CHECK(numel.has_value() && *numel >= 1);
    FUZZ_CHECK(static_cast<int64_t>(in.data.size()) == *numel * t.dtype.ItemSize());
    Touch(in.data);
  }
  FUZZ_CHECK(!r.outputs.empty());
  for (const std::string& o : r.outputs) FUZZ_CHECK(spec.FindOutput(o) != nullptr);
}

// What the batcher does next: queue the request and take it out again.
void Queue(const ModelSpec& spec, const DecodedRequest& d) {
  BatchQueue q(spec.batching, spec.max_batch_size);
  const absl::Time now = absl::UnixEpoch();
  absl::Status pushed = q.Push(d.request, d.timeout, now);
  if (!pushed.ok()) return;  // e.g. a priority above the model's levels
  BatchQueue::Decision next = q.Next(now, /*flush=*/true);
  FUZZ_CHECK(next.batch.size() + next.rejected.size() == 1);
  FUZZ_CHECK(q.size() == 0);
}

// The answer: each requested output echoes the first input's data.
void Encode(const inference::ModelInferRequest& req, const InferRequest& r) {
  InferResult result;
  for (const std::string& name : r.outputs) {
    OutputTensor o;
    o.name = name;
    o.dtype = r.inputs[0].dtype;
    o.shape = r.inputs[0].shape;
    o.data = std::string(r.inputs[0].data);
    result.outputs.push_back(std::move(o));
  }
  inference::ModelInferResponse resp;
  EncodeInferResponse(std::move(result), r.model, "1", req.id(), &resp);
  FUZZ_CHECK(resp.outputs_size() == static_cast<int>(r.outputs.size()));
  FUZZ_CHECK(resp.raw_output_contents_size() == resp.outputs_size());
  for (int i = 0; i < resp.outputs_size(); ++i)
    FUZZ_CHECK(resp.raw_output_contents(i) == r.inputs[0].data);
}

void DecodeAgainst(const inference::ModelInferRequest& req, const ModelSpec& spec) {
  CodecLimits limits;
  limits.max_input_bytes = int64_t{256} << 20;  // kilnd's default --max-input-bytes
  absl::StatusOr<DecodedRequest> d = DecodeInferRequest(req, spec, 1, limits);
  if (!d.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(d.status()));  // the decoder's only error code
    return;
  }
  CheckDecoded(spec, *d->request);
  Encode(req, *d->request);
  Queue(spec, *d);
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  kiln::fuzz::DecodeAgainst(req, kiln::fuzz::BatchedSpec());
  kiln::fuzz::DecodeAgainst(req, kiln::fuzz::PlainSpec());
  return 0;
}
