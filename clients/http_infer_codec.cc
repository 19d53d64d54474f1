// The v2 REST wire format of HttpClient (see http_client.h): infer request
// bodies with binary tensor data, infer responses with binary outputs, and
// HTTP error answers. JSON through nlohmann-json without exceptions: the
// parser is called non-throwing and every value's type is checked before
// it is read.
#include <nlohmann/json.hpp>

#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/http_client.h"

namespace kiln {
namespace {

using Json = nlohmann::json;

std::string Dump(const Json& j) {
  // Invalid UTF-8 in names becomes U+FFFD instead of an exception.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json ParameterJson(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam:
      return p.bool_param();
    case inference::InferParameter::kInt64Param:
      return p.int64_param();
    case inference::InferParameter::kStringParam:
      return p.string_param();
    case inference::InferParameter::kDoubleParam:
      return p.double_param();
    case inference::InferParameter::kUint64Param:
      return p.uint64_param();
    default:
      return nullptr;
  }
}

Json ParametersJson(const google::protobuf::Map<std::string, inference::InferParameter>& params) {
  Json out = Json::object();
  for (const auto& [name, p] : params) out[name] = ParameterJson(p);
  return out;
}

bool InSharedMemory(const google::protobuf::Map<std::string, inference::InferParameter>& params) {
  return params.count("shared_memory_region") > 0;
}

absl::Status Bad(absl::string_view msg) {
  return absl::DataLossError(absl::StrCat("bad infer response: ", msg));
}

// `obj[key]` as a string into `out`; absent is fine unless `required`.
absl::Status ReadString(const Json& obj, const char* key, bool required, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return required ? Bad(absl::StrCat("no '", key, "'")) : absl::OkStatus();
  if (!it->is_string()) return Bad(absl::StrCat("'", key, "' is not a string"));
  *out = it->get<std::string>();
  return absl::OkStatus();
}

// One entry of "outputs": its metadata into `t`, its binary data (from
// body[*offset...]) into `raw`.
absl::Status ReadOutput(const Json& o, absl::string_view body, size_t* offset,
                        inference::ModelInferResponse::InferOutputTensor* t, std::string* raw) {
  if (!o.is_object()) return Bad("an output is not an object");
  if (absl::Status s = ReadString(o, "name", true, t->mutable_name()); !s.ok()) return s;
  if (absl::Status s = ReadString(o, "datatype", true, t->mutable_datatype()); !s.ok()) return s;
  auto shape = o.find("shape");
  if (shape == o.end() || !shape->is_array())
    return Bad(absl::StrCat("output '", t->name(), "' has no shape array"));
  for (const Json& d : *shape) {
    if (!d.is_number_integer()) return Bad(absl::StrCat("output '", t->name(), "': bad shape"));
    t->add_shape(d.get<int64_t>());
  }
  auto params = o.find("parameters");
  const Json* size = nullptr;
  if (params != o.end() && params->is_object()) {
    auto it = params->find("binary_data_size");
    if (it != params->end()) size = &*it;
    auto region = params->find("shared_memory_region");
    if (size == nullptr && region != params->end()) {
      // Written to shared memory: no data here; keep the region's name.
      if (!region->is_string())
        return Bad(absl::StrCat("output '", t->name(), "': bad shared_memory_region"));
      (*t->mutable_parameters())["shared_memory_region"].set_string_param(
          region->get<std::string>());
      raw->clear();
      return absl::OkStatus();
    }
  }
  if (size == nullptr)
    return absl::UnimplementedError(absl::StrCat(
        "output '", t->name(), "' came as JSON data; this client reads binary outputs only"));
  if (!size->is_number_unsigned())
    return Bad(absl::StrCat("output '", t->name(), "': bad binary_data_size"));
  const uint64_t n = size->get<uint64_t>();
  if (n > body.size() - *offset)
    return Bad(absl::StrCat("output '", t->name(), "' announces ", n, " bytes, only ",
                            body.size() - *offset, " left in the body"));
  raw->assign(body.data() + *offset, n);
  *offset += n;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HttpInferBody> EncodeBinaryInferRequest(const inference::ModelInferRequest& r) {
  // Inputs in shared memory carry no data: they have no raw entry, or an
  // empty one when every input has an entry.
  int in_shm = 0;
  for (const auto& t : r.inputs()) in_shm += InSharedMemory(t.parameters());
  const bool raw_per_input = r.raw_input_contents_size() == r.inputs_size();
  if (!raw_per_input && r.raw_input_contents_size() != r.inputs_size() - in_shm)
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTP infer: ", r.inputs_size(), " inputs (", in_shm, " in shared memory) but ",
        r.raw_input_contents_size(),
        " raw_input_contents; every other input must travel as raw bytes"));
  Json j = Json::object();
  if (!r.id().empty()) j["id"] = r.id();
  Json params = ParametersJson(r.parameters());
  if (r.outputs_size() == 0) params["binary_data_output"] = true;
  if (!params.empty()) j["parameters"] = std::move(params);
  Json inputs = Json::array();
  std::vector<const std::string*> raws;
  for (int i = 0, raw = 0; i < r.inputs_size(); ++i) {
    const auto& t = r.inputs(i);
    if (t.has_contents())
      return absl::InvalidArgumentError(
          absl::StrCat("HTTP infer: input '", t.name(), "' has typed contents; send raw bytes"));
    Json p = ParametersJson(t.parameters());
    const bool shm = InSharedMemory(t.parameters());
    const std::string* data = (!shm || raw_per_input) ? &r.raw_input_contents(raw++) : nullptr;
    if (shm && data != nullptr && !data->empty())
      return absl::InvalidArgumentError(absl::StrCat(
          "HTTP infer: input '", t.name(), "' is in shared memory and also has raw bytes"));
    if (!shm) {
      p["binary_data_size"] = data->size();
      raws.push_back(data);
    }
    Json shape = Json::array();
    for (int64_t d : t.shape()) shape.push_back(d);
    inputs.push_back(Json{{"name", t.name()},
                          {"datatype", t.datatype()},
                          {"shape", std::move(shape)},
                          {"parameters", std::move(p)}});
  }
  j["inputs"] = std::move(inputs);
  if (r.outputs_size() > 0) {
    Json outputs = Json::array();
    for (const auto& o : r.outputs()) {
      Json p = ParametersJson(o.parameters());
      if (!InSharedMemory(o.parameters())) p["binary_data"] = true;
      outputs.push_back(Json{{"name", o.name()}, {"parameters", std::move(p)}});
    }
    j["outputs"] = std::move(outputs);
  }
  HttpInferBody out;
  out.model = r.model_name();
  out.version = r.model_version();
  out.body = Dump(j);
  out.header_length = out.body.size();
  size_t total = out.body.size();
  for (const std::string* raw : raws) total += raw->size();
  out.body.reserve(total);
  for (const std::string* raw : raws) out.body += *raw;
  return out;
}

absl::Status DecodeBinaryInferResponse(absl::string_view body,
                                       std::optional<uint64_t> header_length,
                                       inference::ModelInferResponse* response) {
  const uint64_t json_bytes = header_length ? *header_length : body.size();
  if (json_bytes > body.size())
    return Bad(absl::StrCat("Inference-Header-Content-Length ", json_bytes, " is past the ",
                            body.size(), "-byte body"));
  Json j = Json::parse(body.data(), body.data() + json_bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("the header is not a JSON object");
  response->Clear();
  if (absl::Status s = ReadString(j, "model_name", false, response->mutable_model_name()); !s.ok())
    return s;
  if (absl::Status s = ReadString(j, "model_version", false, response->mutable_model_version());
      !s.ok())
    return s;
  if (absl::Status s = ReadString(j, "id", false, response->mutable_id()); !s.ok()) return s;
  auto outputs = j.find("outputs");
  if (outputs == j.end() || !outputs->is_array()) return Bad("no 'outputs' array");
  size_t offset = json_bytes;
  for (const Json& o : *outputs) {
    absl::Status s =
        ReadOutput(o, body, &offset, response->add_outputs(), response->add_raw_output_contents());
    if (!s.ok()) return s;
  }
  if (offset != body.size())
    return Bad(absl::StrCat(body.size() - offset, " bytes after the last output's data"));
  return absl::OkStatus();
}

absl::Status HttpErrorStatus(long http_status, absl::string_view body, absl::string_view what) {
  std::string message;
  Json j = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded() && j.is_object()) {
    auto e = j.find("error");
    if (e != j.end() && e->is_string()) message = e->get<std::string>();
  }
  if (message.empty()) message = std::string(body.substr(0, 512));
  std::string msg = absl::StrCat(what, ": HTTP ", http_status, message.empty() ? "" : ": ", message);
  // kilnd's table (server/status_codes.cc) read backwards, plus HTTP's own.
  switch (http_status) {
    case 400:
      return absl::InvalidArgumentError(msg);
    case 401:
      return absl::UnauthenticatedError(msg);
    case 403:
      return absl::PermissionDeniedError(msg);
    case 404:
      return absl::NotFoundError(msg);
    case 405:
    case 501:
      return absl::UnimplementedError(msg);
    case 409:
      return absl::AbortedError(msg);
    case 413:
    case 429:
    case 431:
      return absl::ResourceExhaustedError(msg);
    case 499:
      return absl::CancelledError(msg);
    case 500:
      return absl::InternalError(msg);
    case 502:
    case 503:
      return absl::UnavailableError(msg);
    case 408:
    case 504:
      return absl::DeadlineExceededError(msg);
    default:
      return absl::UnknownError(msg);
  }
}

}  // namespace kiln
