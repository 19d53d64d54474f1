// The non-infer messages of the REST API (see rest_json.h): protobuf
// responses printed by reflection, errors, and the repository and
// shared-memory bodies.
#include <limits>
#include <map>
#include <new>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "server/echo.h"
#include "server/rest_json.h"
#include "server/rest_json_internal.h"

namespace kiln {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using rest_internal::Bad;
using rest_internal::Dump;
using rest_internal::Json;
using rest_internal::Parse;

Json FieldJson(const Message& m, const Reflection* r, const FieldDescriptor* f, int i);

Json MessageJson(const Message& m) {
  Json out = Json::object();
  const Reflection* r = m.GetReflection();
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    if (f->is_map()) {
      int n = r->FieldSize(m, f);
      if (n == 0) continue;
      Json obj = Json::object();
      for (int i = 0; i < n; ++i) {
        const Message& e = r->GetRepeatedMessage(m, f, i);
        const FieldDescriptor* kf = e.GetDescriptor()->map_key();
        const FieldDescriptor* vf = e.GetDescriptor()->map_value();
        Json key = FieldJson(e, e.GetReflection(), kf, -1);
        obj[key.is_string() ? key.get<std::string>() : Dump(key)] =
            FieldJson(e, e.GetReflection(), vf, -1);
      }
      out[f->name()] = std::move(obj);
    } else if (f->is_repeated()) {
      Json a = Json::array();
      for (int i = 0; i < r->FieldSize(m, f); ++i) a.push_back(FieldJson(m, r, f, i));
      out[f->name()] = std::move(a);
    } else if ((f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE || f->containing_oneof()) &&
               !r->HasField(m, f)) {
      continue;
    } else {
      out[f->name()] = FieldJson(m, r, f, -1);
    }
  }
  return out;
}

// Field `f` of `m` (element `i` of a repeated field, or -1).
Json FieldJson(const Message& m, const Reflection* r, const FieldDescriptor* f, int i) {
  const bool rep = i >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, i) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r->GetRepeatedEnum(m, f, i) : r->GetEnum(m, f))->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageJson(rep ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f));
  }
  return nullptr;
}

}  // namespace

std::string MessageToJson(const google::protobuf::Message& m) { return Dump(MessageJson(m)); }

std::string RepositoryIndexJson(const inference::RepositoryIndexResponse& resp) {
  return Dump(MessageJson(resp)["models"]);
}

std::string ErrorJson(absl::string_view message) {
  return Dump(Json{{"error", std::string(message)}});
}

absl::StatusOr<bool> ParseIndexRequest(absl::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) return false;
  try {
    absl::StatusOr<Json> j = Parse(body);
    if (!j.ok()) return j.status();
    if (!j->is_object()) return Bad("the request must be a JSON object");
    auto r = j->find("ready");
    if (r == j->end()) return false;
    if (!r->is_boolean()) return Bad("'ready' must be a bool");
    return r->get<bool>();
  } catch (const Json::exception& e) {
    return Bad(absl::StrCat("bad request JSON: ", e.what()));
  }
}

absl::Status ParseRepositoryParameters(
    absl::string_view body,
    google::protobuf::Map<std::string, inference::ModelRepositoryParameter>* parameters) {
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) return absl::OkStatus();
  try {
    absl::StatusOr<Json> j = Parse(body);
    if (!j.ok()) return j.status();
    if (!j->is_object()) return Bad("the request must be a JSON object");
    auto p = j->find("parameters");
    if (p == j->end()) return absl::OkStatus();
    if (!p->is_object()) return Bad("'parameters' must be an object");
    for (const auto& [k, v] : p->items()) {
      inference::ModelRepositoryParameter& out = (*parameters)[k];
      if (v.is_boolean())
        out.set_bool_param(v.get<bool>());
      else if (v.is_number_integer() &&
               !(v.is_number_unsigned() &&
                 v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
        out.set_int64_param(v.get<int64_t>());
      else if (v.is_string())
        out.set_string_param(v.get<std::string>());
      else
        return Bad(absl::StrCat("parameter '", Echo(k), "' must be a bool, integer or string"));
    }
    return absl::OkStatus();
  } catch (const Json::exception& e) {
    return Bad(absl::StrCat("bad request JSON: ", e.what()));
  }
}

absl::StatusOr<inference::SystemSharedMemoryRegisterRequest> ParseShmRegisterRequest(
    absl::string_view body, const std::string& name) {
  try {
    absl::StatusOr<Json> j = Parse(body);
    if (!j.ok()) return j.status();
    if (!j->is_object()) return Bad("the request must be a JSON object");
    inference::SystemSharedMemoryRegisterRequest req;
    req.set_name(name);
    auto key = j->find("key");
    if (key == j->end() || !key->is_string()) return Bad("'key' must be a string");
    req.set_key(key->get<std::string>());
    for (const char* field : {"offset", "byte_size"}) {
      auto v = j->find(field);
      if (v == j->end()) {
        if (std::string(field) == "offset") continue;
        return Bad("missing 'byte_size'");
      }
      if (!v->is_number_unsigned())
        return Bad(absl::StrCat("'", field, "' must be a non-negative integer"));
      if (std::string(field) == "offset")
        req.set_offset(v->get<uint64_t>());
      else
        req.set_byte_size(v->get<uint64_t>());
    }
    return req;
  } catch (const Json::exception& e) {
    return Bad(absl::StrCat("bad request JSON: ", e.what()));
  }
}

std::string ShmStatusJson(const inference::SystemSharedMemoryStatusResponse& resp) {
  std::map<std::string, const inference::SystemSharedMemoryStatusResponse::RegionStatus*> sorted;
  for (const auto& [name, r] : resp.regions()) sorted[name] = &r;
  Json a = Json::array();
  for (const auto& [name, r] : sorted)
    a.push_back(Json{{"name", r->name()},
                     {"key", r->key()},
                     {"offset", r->offset()},
                     {"byte_size", r->byte_size()}});
  return Dump(a);
}

}  // namespace kiln
