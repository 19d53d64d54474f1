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
//     must be non-negative integers; sequence parameters are refused;
//   * shared memory (Triton's system shared-memory extension): a tensor
//     whose parameters name shared_memory_region (string) must also give
//     shared_memory_byte_size (integer >= 0; shared_memory_offset is
//     optional, default 0). An input's slice must lie inside the region and
//     hold exactly the tensor's byte size; it carries no other data (its
//     raw_input_contents entry, if any, is empty; as Triton, the raw entries
//     may also skip the inputs in shared memory). An output's slice must lie
//     inside the region; whether it is large enough is known when the
//     output is (WriteShmOutputs). Unknown region: NOT_FOUND; shared memory
//     off (no registry, or no --shm-allow): FAILED_PRECONDITION.
// Every other failure is INVALID_ARGUMENT with a message naming the input.
//
// Inputs in shared memory are copied once from the mapping into the
// request (ShmRegion::Read, guarded against a shrunk object), as the
// transports copy inline bytes once into the request message; outputs are
// copied once from the engine's result into their region.
//
// Thread safety: pure functions.
#ifndef KILN_SERVER_INFER_CODEC_H_
#define KILN_SERVER_INFER_CODEC_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/grpc_service.pb.h"
#include "server/model_spec.h"
#include "server/request.h"
#include "server/shm_registry.h"

namespace kiln {

struct CodecLimits {
  int64_t max_input_bytes = int64_t{1} << 30;  // per input tensor
};

// The tensor parameters of the shared-memory extension.
inline constexpr char kShmRegionParam[] = "shared_memory_region";
inline constexpr char kShmOffsetParam[] = "shared_memory_offset";
inline constexpr char kShmByteSizeParam[] = "shared_memory_byte_size";

// Where a requested output goes: a slice of a registered region, kept
// mapped by `region` until the output is written.
struct ShmOutputSlot {
  std::string output;
  std::shared_ptr<const ShmRegion> region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

struct DecodedRequest {
  RequestPtr request;
  absl::Duration timeout = absl::ZeroDuration();  // the `timeout` parameter
  std::vector<ShmOutputSlot> shm_outputs;         // outputs asked in shared memory
};

// The request's raw input data is referenced, not copied: `req` must
// outlive the returned request. `shm` null: shared memory is off.
absl::StatusOr<DecodedRequest> DecodeInferRequest(const inference::ModelInferRequest& req,
                                                  const ModelSpec& spec, int64_t version,
                                                  const CodecLimits& limits,
                                                  const ShmRegistry* shm = nullptr);

// A tensor's shared-memory parameters (nullopt: it names no region).
struct ShmRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};
// `what` names the tensor in errors ("input 'x'").
absl::StatusOr<std::optional<ShmRef>> ShmRefOf(
    const google::protobuf::Map<std::string, inference::InferParameter>& params,
    const std::string& what);
// Copies an input's slice (exactly `nbytes`, checked) into `out`.
absl::Status ReadShmInput(const ShmRegistry* shm, const ShmRef& ref, const std::string& input,
                          int64_t nbytes, std::string* out);
// The slot of an output's slice (inside its region, checked).
absl::StatusOr<ShmOutputSlot> ResolveShmOutput(const ShmRegistry* shm, const ShmRef& ref,
                                               const std::string& output);
// Writes each output of `slots` into its slice and empties its data (the
// response then carries it by reference). INVALID_ARGUMENT naming the
// output when its slice is too small.
absl::Status WriteShmOutputs(const std::vector<ShmOutputSlot>& slots, InferResult* result);
// Gives each output of `resp` that `req` asked in shared memory the
// request's shared-memory parameters (its raw_output_contents entry stays
// empty, as Triton answers).
void SetShmOutputParameters(const inference::ModelInferRequest& req,
                            inference::ModelInferResponse* resp);

// Fills `resp` with `result`'s outputs as raw_output_contents, moving each
// output's bytes into the response (no copy).
void EncodeInferResponse(InferResult&& result, const std::string& model,
                         const std::string& version, const std::string& id,
                         inference::ModelInferResponse* resp);

}  // namespace kiln

#endif  // KILN_SERVER_INFER_CODEC_H_
