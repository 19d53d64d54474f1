// The KServe v2 HTTP/REST wire format (Open Inference Protocol REST, with
// Triton's binary tensor data extension) converted to and from the
// inference.* protobuf messages that InferenceCore takes, so the REST port
// shares every check of the gRPC path (infer_codec) and adds only JSON's.
//
// Requests: an infer body is JSON, or (binary extension) a JSON header of
// Inference-Header-Content-Length bytes followed by the binary data of the
// inputs that carry parameters.binary_data_size, in input order. Every
// input becomes one raw_input_contents entry: binary data as is, JSON
// `data` (flat or nested arrays, row-major) packed into the datatype's
// little-endian bytes once its element count equals the shape's (checked
// with overflow checks before the buffer is made) and every value fits the
// datatype (BOOL: true / false; integers: JSON integers in range; FP32 /
// FP64: numbers; BYTES: strings). FP16 / BF16 travel as binary data only.
//
// Shared memory (Triton's system shared-memory extension): an input whose
// parameters name shared_memory_region has no `data` and no binary data
// (its raw_input_contents entry is empty; infer_codec reads the region).
// An output the core wrote to shared memory (its parameters carry
// shared_memory_region) is answered with those parameters and no data.
//
// Responses: an output is JSON `data` (FP16 / BF16 as their exact values,
// NaN / Inf as null) unless binary data was asked for it
// (outputs[].parameters.binary_data, or the request parameter
// binary_data_output); binary outputs follow the JSON header in output
// order, each announced by parameters.binary_data_size.
//
// Other messages print as JSON with the .proto field names, 64-bit
// integers as JSON numbers and every primitive field present (as Triton).
//
// No nlohmann exception leaves these functions: malformed input is
// INVALID_ARGUMENT with a message.
//
// Thread safety: pure functions.
#ifndef KILN_SERVER_REST_JSON_H_
#define KILN_SERVER_REST_JSON_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "proto/grpc_service.pb.h"

namespace kiln {

// An infer request body as the core takes it, plus how to answer it.
struct RestInferRequest {
  inference::ModelInferRequest request;  // every input in raw_input_contents
  bool binary_output_default = false;     // request parameter binary_data_output
  std::map<std::string, bool> binary_output;  // outputs[].parameters.binary_data
};

// `header_length`: Inference-Header-Content-Length (nullopt: all JSON).
// `model` / `version` come from the URL.
absl::StatusOr<RestInferRequest> ParseInferRequest(absl::string_view body,
                                                   std::optional<uint64_t> header_length,
                                                   const std::string& model,
                                                   const std::string& version);

struct RestBody {
  std::string body;
  std::optional<size_t> header_length;  // set when binary outputs follow the JSON
};

// Outputs sent as JSON hold at most this many raw bytes in all (8 Mi FP32
// values): as JSON values they take ~16-32 bytes each while encoded.
// Larger outputs are refused (INVALID_ARGUMENT, naming the output) and go
// as binary data (`"binary_data": true`).
inline constexpr size_t kMaxJsonOutputBytes = size_t{32} << 20;

// `resp` (raw outputs, as the core answers) encoded as `req` asks.
absl::StatusOr<RestBody> EncodeInferResponse(const inference::ModelInferResponse& resp,
                                             const RestInferRequest& req);

// `m` as a JSON object (see the file comment).
std::string MessageToJson(const google::protobuf::Message& m);
// The repository index as Triton's REST API answers it: a JSON array.
std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& resp);
// {"error": message} (invalid UTF-8 in the message is replaced).
std::string ErrorJson(absl::string_view message);

// Bodies of the repository extension; an empty body means the defaults.
// {"ready": bool}
absl::StatusOr<bool> ParseIndexRequest(absl::string_view body);
// {"parameters": {name: bool | integer | string}} of a load or unload.
absl::Status ParseRepositoryParameters(
    absl::string_view body,
    google::protobuf::Map<std::string, inference::ModelRepositoryParameter>* parameters);

// System shared memory. The register body of region `name` (from the URL):
// {"key": string, "offset": integer >= 0 (default 0), "byte_size": integer >= 0}.
absl::StatusOr<inference::SystemSharedMemoryRegisterRequest> ParseShmRegisterRequest(
    absl::string_view body, const std::string& name);
// The status as Triton's REST API answers it: a JSON array of
// {"name", "key", "offset", "byte_size"}, sorted by name.
std::string ShmStatusJson(const inference::SystemSharedMemoryStatusResponse& resp);

}  // namespace kiln

#endif  // KILN_SERVER_REST_JSON_H_
