// libFuzzer target: the body of an HTTP/REST infer request (server/rest_json.h),
// as kilnd's REST port hands it over. The first byte chooses the model (bit 1:
// fuzz_util's "plain", else "batched") and whether the body uses the binary
// extension (bit 0: the JSON header ends at the first NUL byte, as if
// Inference-Header-Content-Length said so). The rest is the body. A body that
// parses goes through DecodeInferRequest, as the core would, and an accepted
// request is answered through EncodeInferResponse (infer_codec, then REST)
// with outputs of the model's dtypes.
//
// Nothing may crash, abort, throw or allocate more than the body carries; on
// top of that: a parsed request has one raw entry per input; every error
// message, and every encoded response header, is valid JSON.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "nlohmann/json.hpp"
#include "server/infer_codec.h"
#include "server/rest_json.h"
#include "tests/fuzz/fuzz_util.h"

namespace kiln::fuzz {
namespace {

bool ValidJson(const std::string& text) {
  return !nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_discarded();
}

void CheckError(const absl::Status& s) {
  FUZZ_CHECK(!s.ok());
  FUZZ_CHECK(ValidJson(ErrorJson(s.message())));
}

void Run(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const uint8_t mode = data[0];
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::optional<uint64_t> header_length;
  if (mode & 1) {
    size_t nul = body.find('\0');
    header_length = nul == std::string::npos ? body.size() : nul;
  }
  const ModelSpec& spec = (mode & 2) ? PlainSpec() : BatchedSpec();
  absl::StatusOr<RestInferRequest> r = ParseInferRequest(body, header_length, spec.name, "");
  if (!r.ok()) return CheckError(r.status());
  FUZZ_CHECK(r->request.raw_input_contents_size() == r->request.inputs_size());
  CodecLimits limits;
  limits.max_input_bytes = 1 << 20;
  absl::StatusOr<DecodedRequest> d = DecodeInferRequest(r->request, spec, 1, limits);
  if (!d.ok()) return CheckError(d.status());
  InferResult result;
  for (const std::string& name : d->request->outputs) {
    const TensorSpec* t = spec.FindOutput(name);
    FUZZ_CHECK(t != nullptr);
    OutputTensor o;
    o.name = name;
    o.dtype = t->dtype;
    o.shape = {2};
    o.data.assign(2 * t->dtype.ItemSize(), '\x7f');
    result.outputs.push_back(std::move(o));
  }
  inference::ModelInferResponse resp;
  EncodeInferResponse(std::move(result), spec.name, "1", r->request.id(), &resp);
  absl::StatusOr<RestBody> out = EncodeInferResponse(resp, *r);
  FUZZ_CHECK(out.ok());
  const size_t json_size = out->header_length ? *out->header_length : out->body.size();
  FUZZ_CHECK(json_size <= out->body.size());
  FUZZ_CHECK(ValidJson(out->body.substr(0, json_size)));
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::Run(data, size);
  return 0;
}
