// Decoding and validation of ModelInferRequest messages, and encoding of
// responses. Everything about a request is checked here, before anything
// is queued or allocated for it:
//   * inputs: known names, no duplicates, none missing; datatype equal to
//     the model's; rank and dims matching the config (-1 = any); batch dim
//     in [1, max_batch_size] and equal across inputs; no empty dims;
//   * sizes: the element count and byte size are computed with overflow
//     checks and must stay under Limits::max_input_bytes (per input) before
//     any buffer is made; raw sizes must match exactly, typed contents must
//     have exactly one element per value and use the datatype's field;
//   * raw_input_contents and typed contents together are refused;
//   * requested outputs must exist; parameters `priority` and `timeout`
//     must be non-negative integers; sequence parameters are refused.
// Every failure is INVALID_ARGUMENT with a message naming the input.
//
// Thread safety: pure functions.
#ifndef KILN_SERVER_INFER_CODEC_H_
#define KILN_SERVER_INFER_CODEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/grpc_service.pb.h"
#include "server/model_spec.h"
#include "server/request.h"

namespace kiln {

struct CodecLimits {
  int64_t max_input_bytes = int64_t{1} << 30;  // per input tensor
};

struct DecodedRequest {
  RequestPtr request;
  absl::Duration timeout = absl::ZeroDuration();  // the `timeout` parameter
};

// The request's raw input data is referenced, not copied: `req` must
// outlive the returned request.
absl::StatusOr<DecodedRequest> DecodeInferRequest(const inference::ModelInferRequest& req,
                                                  const ModelSpec& spec, int64_t version,
                                                  const CodecLimits& limits);

// Fills `resp` with `result`'s outputs as raw_output_contents, moving each
// output's bytes into the response (no copy).
void EncodeInferResponse(InferResult&& result, const std::string& model,
                         const std::string& version, const std::string& id,
                         inference::ModelInferResponse* resp);

}  // namespace kiln

#endif  // KILN_SERVER_INFER_CODEC_H_
