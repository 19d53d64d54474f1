#include "server/rest_json.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/echo.h"
#include "server/model_spec.h"
#include "server/rest_json_internal.h"

namespace kiln {
namespace {

using rest_internal::Bad;
using rest_internal::Dump;
using rest_internal::Json;
using rest_internal::KindOf;
using rest_internal::Parse;

// Nested `data` arrays deeper than this are refused (no tensor has a rank near it).
constexpr int kMaxDataDepth = 64;

// An InferParameter from a JSON scalar.
absl::Status ToParameter(const std::string& name, const Json& v, inference::InferParameter* p) {
  if (v.is_boolean()) {
    p->set_bool_param(v.get<bool>());
  } else if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      p->set_int64_param(static_cast<int64_t>(u));
    else
      p->set_uint64_param(u);
  } else if (v.is_number_integer()) {
    p->set_int64_param(v.get<int64_t>());
  } else if (v.is_number_float()) {
    p->set_double_param(v.get<double>());
  } else if (v.is_string()) {
    p->set_string_param(v.get<std::string>());
  } else {
    return Bad(absl::StrCat("parameter '", Echo(name), "' must be a bool, number or string, not ",
                            KindOf(v)));
  }
  return absl::OkStatus();
}

absl::Status ToParameters(const Json& params, const std::string& where,
                          google::protobuf::Map<std::string, inference::InferParameter>* out) {
  if (!params.is_object()) return Bad(absl::StrCat(where, "'parameters' must be an object"));
  for (const auto& [k, v] : params.items()) {
    inference::InferParameter p;
    if (absl::Status s = ToParameter(k, v, &p); !s.ok()) return s;
    (*out)[k] = std::move(p);
  }
  return absl::OkStatus();
}

// Collects the leaves of `data` (flat or nested arrays) in row-major order.
absl::Status Flatten(const Json& data, const std::string& input, std::vector<const Json*>* out) {
  if (!data.is_array()) {
    out->push_back(&data);
    return absl::OkStatus();
  }
  struct Frame {
    const Json* array;
    size_t next;
  };
  std::vector<Frame> stack = {{&data, 0}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next == f.array->size()) {
      stack.pop_back();
      continue;
    }
    const Json& v = (*f.array)[f.next++];
    if (v.is_array()) {
      if (stack.size() >= kMaxDataDepth)
        return Bad(absl::StrCat("input '", Echo(input), "': 'data' is nested deeper than ",
                                kMaxDataDepth));
      stack.push_back({&v, 0});
    } else {
      out->push_back(&v);
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status PackInts(const std::vector<const Json*>& vals, const std::string& input,
                      std::string* out) {
  out->resize(vals.size() * sizeof(T));
  for (size_t i = 0; i < vals.size(); ++i) {
    const Json& v = *vals[i];
    bool fits = false;
    T t{};
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      fits = u <= static_cast<uint64_t>(std::numeric_limits<T>::max());
      t = static_cast<T>(u);
    } else if (v.is_number_integer()) {
      int64_t s = v.get<int64_t>();
      fits = s >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
             (s < 0 ||
              static_cast<uint64_t>(s) <= static_cast<uint64_t>(std::numeric_limits<T>::max()));
      t = static_cast<T>(s);
    } else {
      return Bad(absl::StrCat("input '", Echo(input), "': value at index ", i, " is a ", KindOf(v),
                              ", not an integer"));
    }
    if (!fits)
      return Bad(absl::StrCat("input '", Echo(input), "': value ", Dump(v), " at index ", i,
                              " does not fit the datatype"));
    std::memcpy(out->data() + i * sizeof(T), &t, sizeof(T));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status PackFloats(const std::vector<const Json*>& vals, const std::string& input,
                        std::string* out) {
  out->resize(vals.size() * sizeof(T));
  for (size_t i = 0; i < vals.size(); ++i) {
    const Json& v = *vals[i];
    if (!v.is_number())
      return Bad(absl::StrCat("input '", Echo(input), "': value at index ", i, " is a ", KindOf(v),
                              ", not a number"));
    T t = static_cast<T>(v.get<double>());
    std::memcpy(out->data() + i * sizeof(T), &t, sizeof(T));
  }
  return absl::OkStatus();
}

// JSON values of `datatype` as little-endian bytes.
absl::Status Pack(const std::string& datatype, const std::vector<const Json*>& vals,
                  const std::string& input, std::string* out) {
  if (datatype == "BOOL") {
    out->resize(vals.size());
    for (size_t i = 0; i < vals.size(); ++i) {
      if (!vals[i]->is_boolean())
        return Bad(absl::StrCat("input '", Echo(input), "': value at index ", i, " is a ",
                                KindOf(*vals[i]), ", not a boolean"));
      (*out)[i] = vals[i]->get<bool>() ? 1 : 0;
    }
    return absl::OkStatus();
  }
  if (datatype == "INT8") return PackInts<int8_t>(vals, input, out);
  if (datatype == "INT16") return PackInts<int16_t>(vals, input, out);
  if (datatype == "INT32") return PackInts<int32_t>(vals, input, out);
  if (datatype == "INT64") return PackInts<int64_t>(vals, input, out);
  if (datatype == "UINT8") return PackInts<uint8_t>(vals, input, out);
  if (datatype == "UINT16") return PackInts<uint16_t>(vals, input, out);
  if (datatype == "UINT32") return PackInts<uint32_t>(vals, input, out);
  if (datatype == "UINT64") return PackInts<uint64_t>(vals, input, out);
  if (datatype == "FP32") return PackFloats<float>(vals, input, out);
  if (datatype == "FP64") return PackFloats<double>(vals, input, out);
  if (datatype == "BYTES") {
    size_t total = 0;
    for (size_t i = 0; i < vals.size(); ++i) {
      if (!vals[i]->is_string())
        return Bad(absl::StrCat("input '", Echo(input), "': value at index ", i, " is a ",
                                KindOf(*vals[i]), ", not a string"));
      const auto& s = vals[i]->get_ref<const std::string&>();
      if (s.size() > std::numeric_limits<uint32_t>::max())
        return Bad(absl::StrCat("input '", Echo(input), "': string at index ", i, " is too long"));
      total += 4 + s.size();
    }
    out->reserve(total);
    for (const Json* v : vals) {
      const auto& s = v->get_ref<const std::string&>();
      uint32_t n = static_cast<uint32_t>(s.size());
      char len[4] = {static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 24)};
      out->append(len, 4);
      out->append(s);
    }
    return absl::OkStatus();
  }
  if (datatype == "FP16" || datatype == "BF16")
    return Bad(absl::StrCat("input '", Echo(input), "': ", datatype,
                            " data must be sent as binary data (parameters.binary_data_size)"));
  return Bad(absl::StrCat("input '", Echo(input), "': datatype '", Echo(datatype),
                          "' is not a KServe datatype"));
}

// The string field `key` of `obj` ("" and OK when absent and !required).
absl::StatusOr<std::string> StringField(const Json& obj, const char* key, const std::string& where,
                                        bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return Bad(absl::StrCat(where, "missing '", key, "'"));
    return std::string();
  }
  if (!it->is_string()) return Bad(absl::StrCat(where, "'", key, "' must be a string"));
  return it->get<std::string>();
}

absl::Status ParseInput(const Json& in, int index, absl::string_view binary, size_t* offset,
                        inference::ModelInferRequest* req) {
  std::string where = absl::StrCat("inputs[", index, "]: ");
  if (!in.is_object()) return Bad(absl::StrCat(where, "must be an object"));
  absl::StatusOr<std::string> name = StringField(in, "name", where, true);
  if (!name.ok()) return name.status();
  where = absl::StrCat("input '", Echo(*name), "': ");
  absl::StatusOr<std::string> datatype = StringField(in, "datatype", where, true);
  if (!datatype.ok()) return datatype.status();
  auto* t = req->add_inputs();
  t->set_name(*name);
  t->set_datatype(*datatype);
  auto shape = in.find("shape");
  if (shape == in.end() || !shape->is_array())
    return Bad(absl::StrCat(where, "'shape' must be an array of integers"));
  std::vector<int64_t> dims;
  for (const Json& d : *shape) {
    if (!d.is_number_integer() || (!d.is_number_unsigned() && d.get<int64_t>() < 0) ||
        (d.is_number_unsigned() &&
         d.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      return Bad(
          absl::StrCat(where, "'shape' must hold non-negative integers, not ", Echo(Dump(d))));
    dims.push_back(d.get<int64_t>());
    t->add_shape(dims.back());
  }
  std::optional<uint64_t> binary_size;
  if (auto p = in.find("parameters"); p != in.end()) {
    if (absl::Status s = ToParameters(*p, where, t->mutable_parameters()); !s.ok()) return s;
    if (auto b = p->find("binary_data_size"); b != p->end()) {
      if (!b->is_number_unsigned())
        return Bad(absl::StrCat(where, "'binary_data_size' must be a non-negative integer"));
      binary_size = b->get<uint64_t>();
      t->mutable_parameters()->erase("binary_data_size");
    }
  }
  auto data = in.find("data");
  std::string* raw = req->add_raw_input_contents();
  if (t->parameters().count("shared_memory_region")) {
    // In shared memory: an empty raw entry (infer_codec reads the region).
    if (binary_size || data != in.end())
      return Bad(absl::StrCat(where, "is in shared memory and also has 'data' or "
                                     "parameters.binary_data_size"));
    return absl::OkStatus();
  }
  if (binary_size) {
    if (data != in.end())
      return Bad(absl::StrCat(where, "has both 'data' and parameters.binary_data_size"));
    if (*binary_size > binary.size() - *offset)
      return Bad(absl::StrCat(where, "binary_data_size ", *binary_size,
                              " is past the end of the "
                              "body (",
                              binary.size() - *offset, " binary bytes left)"));
    raw->assign(binary.data() + *offset, *binary_size);
    *offset += *binary_size;
    return absl::OkStatus();
  }
  if (data == in.end()) return Bad(absl::StrCat(where, "has no 'data'"));
  std::optional<int64_t> numel = CheckedNumel(dims);
  if (!numel) return Bad(absl::StrCat(where, "the shape overflows"));
  std::vector<const Json*> vals;
  if (absl::Status s = Flatten(*data, *name, &vals); !s.ok()) return s;
  if (static_cast<int64_t>(vals.size()) != *numel)
    return Bad(absl::StrCat(where, "expected ", *numel, " values for shape [",
                            Echo(absl::StrJoin(dims, ",")), "], got ", vals.size()));
  return Pack(*datatype, vals, *name, raw);
}

absl::StatusOr<RestInferRequest> ParseInferRequestOrThrow(absl::string_view body,
                                                          std::optional<uint64_t> header_length,
                                                          const std::string& model,
                                                          const std::string& version) {
  absl::string_view text = body, binary;
  if (header_length) {
    if (*header_length > body.size())
      return Bad(absl::StrCat("Inference-Header-Content-Length ", *header_length,
                              " is larger than the body (", body.size(), " bytes)"));
    text = body.substr(0, *header_length);
    binary = body.substr(*header_length);
  }
  absl::StatusOr<Json> parsed = Parse(text);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  if (!j.is_object()) return Bad("the request must be a JSON object");
  RestInferRequest out;
  inference::ModelInferRequest& req = out.request;
  req.set_model_name(model);
  req.set_model_version(version);
  absl::StatusOr<std::string> id = StringField(j, "id", "", false);
  if (!id.ok()) return id.status();
  req.set_id(*id);
  if (auto p = j.find("parameters"); p != j.end()) {
    if (absl::Status s = ToParameters(*p, "", req.mutable_parameters()); !s.ok()) return s;
    auto b = req.parameters().find("binary_data_output");
    if (b != req.parameters().end()) {
      if (b->second.parameter_choice_case() != inference::InferParameter::kBoolParam)
        return Bad("parameter 'binary_data_output' must be a bool");
      out.binary_output_default = b->second.bool_param();
    }
  }
  auto inputs = j.find("inputs");
  if (inputs == j.end() || !inputs->is_array()) return Bad("'inputs' must be an array");
  size_t offset = 0;
  for (size_t i = 0; i < inputs->size(); ++i)
    if (absl::Status s = ParseInput((*inputs)[i], static_cast<int>(i), binary, &offset, &req);
        !s.ok())
      return s;
  if (offset != binary.size())
    return Bad(absl::StrCat(binary.size() - offset,
                            " bytes of binary data after the inputs' "
                            "binary_data_size"));
  if (auto outputs = j.find("outputs"); outputs != j.end()) {
    if (!outputs->is_array()) return Bad("'outputs' must be an array");
    for (size_t i = 0; i < outputs->size(); ++i) {
      const Json& o = (*outputs)[i];
      std::string where = absl::StrCat("outputs[", i, "]: ");
      if (!o.is_object()) return Bad(absl::StrCat(where, "must be an object"));
      absl::StatusOr<std::string> name = StringField(o, "name", where, true);
      if (!name.ok()) return name.status();
      auto* t = req.add_outputs();
      t->set_name(*name);
      if (auto p = o.find("parameters"); p != o.end()) {
        where = absl::StrCat("output '", Echo(*name), "': ");
        if (absl::Status s = ToParameters(*p, where, t->mutable_parameters()); !s.ok()) return s;
        auto b = t->parameters().find("binary_data");
        if (b != t->parameters().end()) {
          if (b->second.parameter_choice_case() != inference::InferParameter::kBoolParam)
            return Bad(absl::StrCat(where, "parameter 'binary_data' must be a bool"));
          out.binary_output[*name] = b->second.bool_param();
          t->mutable_parameters()->erase("binary_data");
        }
      }
    }
  }
  return out;
}

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(man), -24);  // zero / subnormal
    return sign ? -f : f;
  }
  uint32_t bits =
      exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
  std::memcpy(&f, &bits, 4);
  return f;
}

float Bf16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T>
T Load(const char* p) {
  T t;
  std::memcpy(&t, p, sizeof(T));
  return t;
}

template <typename T, typename F>
absl::StatusOr<Json> Unpack(const std::string& raw, F convert) {
  if (raw.size() % sizeof(T) != 0) return absl::InternalError("output size is not whole elements");
  Json a = Json::array();
  a.get_ref<Json::array_t&>().reserve(raw.size() / sizeof(T));
  for (size_t i = 0; i < raw.size(); i += sizeof(T)) a.push_back(convert(Load<T>(raw.data() + i)));
  return a;
}

// Raw output bytes as a flat JSON array.
absl::StatusOr<Json> OutputData(const std::string& datatype, const std::string& raw) {
  auto same = [](auto v) { return v; };
  if (datatype == "BOOL") return Unpack<uint8_t>(raw, [](uint8_t v) { return v != 0; });
  if (datatype == "INT8") return Unpack<int8_t>(raw, same);
  if (datatype == "INT16") return Unpack<int16_t>(raw, same);
  if (datatype == "INT32") return Unpack<int32_t>(raw, same);
  if (datatype == "INT64") return Unpack<int64_t>(raw, same);
  if (datatype == "UINT8") return Unpack<uint8_t>(raw, same);
  if (datatype == "UINT16") return Unpack<uint16_t>(raw, same);
  if (datatype == "UINT32") return Unpack<uint32_t>(raw, same);
  if (datatype == "UINT64") return Unpack<uint64_t>(raw, same);
  if (datatype == "FP32") return Unpack<float>(raw, [](float v) { return static_cast<double>(v); });
  if (datatype == "FP64") return Unpack<double>(raw, same);
  if (datatype == "FP16")
    return Unpack<uint16_t>(raw, [](uint16_t v) { return static_cast<double>(HalfToFloat(v)); });
  if (datatype == "BF16")
    return Unpack<uint16_t>(raw, [](uint16_t v) { return static_cast<double>(Bf16ToFloat(v)); });
  if (datatype == "BYTES") {
    Json a = Json::array();
    for (size_t i = 0; i < raw.size();) {
      if (raw.size() - i < 4) return absl::InternalError("truncated BYTES output");
      uint32_t n = Load<uint32_t>(raw.data() + i);
      i += 4;
      if (n > raw.size() - i) return absl::InternalError("truncated BYTES output");
      a.push_back(raw.substr(i, n));
      i += n;
    }
    return a;
  }
  return absl::InternalError(absl::StrCat("output datatype ", datatype, " has no JSON form"));
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

}  // namespace

absl::StatusOr<RestInferRequest> ParseInferRequest(absl::string_view body,
                                                   std::optional<uint64_t> header_length,
                                                   const std::string& model,
                                                   const std::string& version) {
  try {
    return ParseInferRequestOrThrow(body, header_length, model, version);
  } catch (const Json::exception& e) {
    return Bad(absl::StrCat("bad request JSON: ", e.what()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory while decoding the request");
  }
}

absl::StatusOr<RestBody> EncodeInferResponse(const inference::ModelInferResponse& resp,
                                             const RestInferRequest& req) {
  try {
    Json j = Json::object();
    j["model_name"] = resp.model_name();
    j["model_version"] = resp.model_version();
    if (!resp.id().empty()) j["id"] = resp.id();
    if (!resp.parameters().empty()) {
      Json p = Json::object();
      for (const auto& [k, v] : resp.parameters()) p[k] = ParameterJson(v);
      j["parameters"] = std::move(p);
    }
    if (resp.raw_output_contents_size() != resp.outputs_size())
      return absl::InternalError("the response has no raw data for some outputs");
    Json outputs = Json::array();
    std::vector<int> binary;
    size_t json_bytes = 0;
    for (int i = 0; i < resp.outputs_size(); ++i) {
      const auto& o = resp.outputs(i);
      const std::string& raw = resp.raw_output_contents(i);
      Json t = Json::object();
      t["name"] = o.name();
      t["datatype"] = o.datatype();
      t["shape"] = Json(std::vector<int64_t>(o.shape().begin(), o.shape().end()));
      if (o.parameters().count("shared_memory_region")) {
        // Written to shared memory: its parameters, no data (as Triton).
        Json p = Json::object();
        for (const auto& [k, v] : o.parameters()) p[k] = ParameterJson(v);
        t["parameters"] = std::move(p);
        outputs.push_back(std::move(t));
        continue;
      }
      auto b = req.binary_output.find(o.name());
      bool as_binary = b != req.binary_output.end() ? b->second : req.binary_output_default;
      if (as_binary) {
        t["parameters"] = {{"binary_data_size", raw.size()}};
        binary.push_back(i);
      } else {
        json_bytes += raw.size();
        if (json_bytes > kMaxJsonOutputBytes)
          return absl::InvalidArgumentError(absl::StrCat(
              "output '", Echo(o.name()), "' (", raw.size(), " bytes) brings the outputs sent as "
              "JSON past ", kMaxJsonOutputBytes, " bytes; ask for it as binary data "
              "(\"parameters\": {\"binary_data\": true})"));
        absl::StatusOr<Json> data = OutputData(o.datatype(), raw);
        if (!data.ok()) return data.status();
        t["data"] = *std::move(data);
      }
      outputs.push_back(std::move(t));
    }
    j["outputs"] = std::move(outputs);
    RestBody out;
    out.body = Dump(j);
    if (!binary.empty()) {
      out.header_length = out.body.size();
      for (int i : binary) out.body += resp.raw_output_contents(i);
    }
    return out;
  } catch (const Json::exception& e) {
    return absl::InternalError(absl::StrCat("cannot encode the response: ", e.what()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("out of memory while encoding the response");
  }
}

}  // namespace kiln
