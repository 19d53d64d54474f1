#include "server/infer_codec.h"

#include <cstring>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "server/echo.h"
#include "server/executor.h"

namespace kiln {
namespace {

using Input = inference::ModelInferRequest::InferInputTensor;

absl::Status Bad(const std::string& msg) { return absl::InvalidArgumentError(msg); }

// A request's shape as its errors show it (a client may send any rank).
std::string ShapeStr(const google::protobuf::RepeatedField<int64_t>& s) {
  return Echo(absl::StrCat("[", absl::StrJoin(s, ","), "]"));
}

bool HasTypedContents(const Input& in) {
  if (!in.has_contents()) return false;
  const auto& c = in.contents();
  return c.bool_contents_size() || c.int_contents_size() || c.int64_contents_size() ||
         c.uint_contents_size() || c.uint64_contents_size() || c.fp32_contents_size() ||
         c.fp64_contents_size() || c.bytes_contents_size();
}

// Number of typed values set in fields other than `used`.
int OtherFields(const inference::InferTensorContents& c, int used) {
  int sizes[] = {c.bool_contents_size(),  c.int_contents_size(),    c.int64_contents_size(),
                 c.uint_contents_size(),  c.uint64_contents_size(), c.fp32_contents_size(),
                 c.fp64_contents_size(),  c.bytes_contents_size()};
  int other = 0;
  for (int i = 0; i < 8; ++i)
    if (i != used && sizes[i] > 0) ++other;
  return other;
}

template <typename Dst, typename Src>
absl::Status Pack(const google::protobuf::RepeatedField<Src>& src, const std::string& name,
                  std::string* out) {
  out->resize(static_cast<size_t>(src.size()) * sizeof(Dst));
  char* p = out->data();
  for (int i = 0; i < src.size(); ++i) {
    Src v = src.Get(i);
    if constexpr (std::is_integral_v<Dst> && !std::is_same_v<Dst, bool>) {
      if (v < static_cast<Src>(std::numeric_limits<Dst>::min()) ||
          v > static_cast<Src>(std::numeric_limits<Dst>::max()))
        return Bad(absl::StrCat("input '", Echo(name), "': value ", v, " at index ", i,
                                " does not fit the datatype"));
    }
    Dst d = static_cast<Dst>(v);
    std::memcpy(p + static_cast<size_t>(i) * sizeof(Dst), &d, sizeof(Dst));
  }
  return absl::OkStatus();
}

// Converts typed contents to raw bytes; `numel` values expected.
absl::Status TypedToRaw(const Input& in, DType dtype, int64_t numel, std::string* out) {
  const auto& c = in.contents();
  const std::string& name = in.name();
  int field;
  int64_t count;
  switch (dtype.scalar) {
    case ScalarType::kBool: field = 0; count = c.bool_contents_size(); break;
    case ScalarType::kInt8: case ScalarType::kInt16: case ScalarType::kInt32:
      field = 1; count = c.int_contents_size(); break;
    case ScalarType::kInt64: field = 2; count = c.int64_contents_size(); break;
    case ScalarType::kUInt8: case ScalarType::kUInt16: case ScalarType::kUInt32:
      field = 3; count = c.uint_contents_size(); break;
    case ScalarType::kUInt64: field = 4; count = c.uint64_contents_size(); break;
    case ScalarType::kFloat32: field = 5; count = c.fp32_contents_size(); break;
    case ScalarType::kFloat64: field = 6; count = c.fp64_contents_size(); break;
    default:
      return Bad(absl::StrCat("input '", Echo(name), "': ", dtype.KServeName(),
                              " data must be sent in raw_input_contents"));
  }
  if (OtherFields(c, field) > 0)
    return Bad(absl::StrCat("input '", Echo(name), "': contents use a field that does not match "
                            "datatype ", dtype.KServeName()));
  if (count != numel)
    return Bad(absl::StrCat("input '", Echo(name), "': expected ", numel, " values for shape ",
                            ShapeStr(in.shape()), ", got ", count));
  switch (dtype.scalar) {
    case ScalarType::kBool: {
      out->resize(static_cast<size_t>(numel));
      for (int64_t i = 0; i < numel; ++i) (*out)[i] = c.bool_contents(static_cast<int>(i)) ? 1 : 0;
      return absl::OkStatus();
    }
    case ScalarType::kInt8: return Pack<int8_t>(c.int_contents(), name, out);
    case ScalarType::kInt16: return Pack<int16_t>(c.int_contents(), name, out);
    case ScalarType::kInt32: return Pack<int32_t>(c.int_contents(), name, out);
    case ScalarType::kInt64: return Pack<int64_t>(c.int64_contents(), name, out);
    case ScalarType::kUInt8: return Pack<uint8_t>(c.uint_contents(), name, out);
    case ScalarType::kUInt16: return Pack<uint16_t>(c.uint_contents(), name, out);
    case ScalarType::kUInt32: return Pack<uint32_t>(c.uint_contents(), name, out);
    case ScalarType::kUInt64: return Pack<uint64_t>(c.uint64_contents(), name, out);
    case ScalarType::kFloat32: return Pack<float>(c.fp32_contents(), name, out);
    case ScalarType::kFloat64: return Pack<double>(c.fp64_contents(), name, out);
    default: return Bad("unreachable datatype");
  }
}

absl::StatusOr<int64_t> NonNegativeInt(const inference::InferParameter& p, const std::string& name) {
  if (p.parameter_choice_case() == inference::InferParameter::kInt64Param) {
    if (p.int64_param() < 0) return Bad(absl::StrCat("parameter '", name, "' is negative"));
    return p.int64_param();
  }
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) {
    if (p.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return Bad(absl::StrCat("parameter '", name, "' is too large"));
    return static_cast<int64_t>(p.uint64_param());
  }
  return Bad(absl::StrCat("parameter '", name, "' must be an integer (int64_param)"));
}

absl::Status ReadParameters(const inference::ModelInferRequest& req, InferRequest* r,
                            absl::Duration* timeout) {
  for (const auto& [name, p] : req.parameters()) {
    if (name == "priority") {
      ASSIGN_OR_RETURN(int64_t v, NonNegativeInt(p, name));
      if (v > 1000000) return Bad("parameter 'priority' is too large");
      r->priority = static_cast<int>(v);
    } else if (name == "timeout") {
      ASSIGN_OR_RETURN(int64_t v, NonNegativeInt(p, name));
      if (v > (int64_t{1} << 40)) return Bad("parameter 'timeout' is too large");
      *timeout = absl::Microseconds(v);
    } else if (name == "sequence_id" || name == "sequence_start" || name == "sequence_end") {
      bool set = (p.parameter_choice_case() == inference::InferParameter::kBoolParam &&
                  p.bool_param()) ||
                 (p.parameter_choice_case() == inference::InferParameter::kInt64Param &&
                  p.int64_param() != 0) ||
                 (p.parameter_choice_case() == inference::InferParameter::kUint64Param &&
                  p.uint64_param() != 0) ||
                 (p.parameter_choice_case() == inference::InferParameter::kStringParam &&
                  !p.string_param().empty());
      if (set) return Bad("sequence batching (parameter '" + name + "') is not supported");
    }
    // Other parameters (binary_data_output, triton_*, ...) do not change
    // what kiln computes and are ignored.
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecodedRequest> DecodeInferRequest(const inference::ModelInferRequest& req,
                                                  const ModelSpec& spec, int64_t version,
                                                  const CodecLimits& limits,
                                                  const ShmRegistry* shm) {
  DecodedRequest out;
  auto r = std::make_shared<InferRequest>();
  r->model = spec.name;
  r->version = version;
  r->id = req.id();
  r->priority = 0;  // default level unless the request says otherwise
  RETURN_IF_ERROR(ReadParameters(req, r.get(), &out.timeout));

  // raw_input_contents: one entry per input, or (as Triton's clients send
  // it) one per input not in shared memory.
  int shm_inputs = 0;
  for (const Input& in : req.inputs())
    if (in.parameters().count(kShmRegionParam)) ++shm_inputs;
  const bool raw = req.raw_input_contents_size() > 0;
  const bool raw_skips_shm =
      raw && shm_inputs > 0 && req.raw_input_contents_size() == req.inputs_size() - shm_inputs;
  if (raw && req.raw_input_contents_size() != req.inputs_size() && !raw_skips_shm)
    return Bad(absl::StrCat("raw_input_contents has ", req.raw_input_contents_size(),
                            " entries for ", req.inputs_size(), " inputs (", shm_inputs,
                            " in shared memory)"));
  int next_raw = 0;
  const bool batched = spec.max_batch_size > 0;
  std::vector<InputTensor> by_index(spec.inputs.size());
  std::vector<bool> present(spec.inputs.size(), false);
  int64_t batch = -1;
  for (int i = 0; i < req.inputs_size(); ++i) {
    const Input& in = req.inputs(i);
    size_t idx = spec.inputs.size();
    for (size_t k = 0; k < spec.inputs.size(); ++k)
      if (spec.inputs[k].name == in.name()) idx = k;
    if (idx == spec.inputs.size()) {
      std::vector<std::string> names;
      for (const TensorSpec& t : spec.inputs) names.push_back(t.name);
      return Bad(absl::StrCat("unknown input '", Echo(in.name()), "' for model '", spec.name,
                              "' (inputs: ", absl::StrJoin(names, ", "), ")"));
    }
    if (present[idx]) return Bad(absl::StrCat("input '", Echo(in.name()), "' is given twice"));
    present[idx] = true;
    const TensorSpec& t = spec.inputs[idx];
    if (in.datatype() != t.dtype.KServeName())
      return Bad(absl::StrCat("input '", Echo(in.name()), "': datatype '", Echo(in.datatype()),
                              "' does not match the model's ", t.dtype.KServeName()));
    const size_t rank = t.dims.size() + (batched ? 1 : 0);
    // Leniency as onnxruntime's: a scalar input may come as shape [1] (the
    // Silero VAD web client sends its `sr` so); it reaches the model as a
    // scalar.
    const bool scalar_as_1 =
        rank == 0 && in.shape_size() == 1 && in.shape(0) == 1;
    if (static_cast<size_t>(in.shape_size()) != rank && !scalar_as_1)
      return Bad(absl::StrCat("input '", Echo(in.name()), "': shape ", ShapeStr(in.shape()),
                              " has rank ", in.shape_size(), ", the model expects rank ", rank));
    for (int d = 0; d < in.shape_size(); ++d)
      if (in.shape(d) < 1)
        return Bad(absl::StrCat("input '", Echo(in.name()), "': shape ", ShapeStr(in.shape()),
                                " has an empty or negative dim"));
    if (batched) {
      int64_t b = in.shape(0);
      if (b > spec.max_batch_size)
        return Bad(absl::StrCat("input '", Echo(in.name()), "': batch size ", b,
                                " exceeds the model's max_batch_size ", spec.max_batch_size));
      if (batch >= 0 && b != batch)
        return Bad(absl::StrCat("inputs disagree on the batch size (", batch, " vs ", b, ")"));
      batch = b;
    }
    for (size_t d = 0; d < t.dims.size(); ++d) {
      int64_t got = in.shape(static_cast<int>(d + (batched ? 1 : 0)));
      if (t.dims[d] != -1 && t.dims[d] != got) {
        std::vector<int64_t> want = spec.FullDims(t, -1);
        return Bad(absl::StrCat("input '", Echo(in.name()), "': shape ", ShapeStr(in.shape()),
                                " does not match the model's [", absl::StrJoin(want, ","),
                                "] (-1 = any)"));
      }
    }
    std::vector<int64_t> shape(in.shape().begin(), in.shape().end());
    if (scalar_as_1) shape.clear();
    std::optional<int64_t> numel = CheckedNumel(shape);
    const int64_t item = t.dtype.ItemSize();
    if (!numel || *numel > std::numeric_limits<int64_t>::max() / item)
      return Bad(absl::StrCat("input '", Echo(in.name()), "': shape ", ShapeStr(in.shape()),
                              " overflows"));
    const int64_t nbytes = *numel * item;
    if (nbytes > limits.max_input_bytes)
      return Bad(absl::StrCat("input '", Echo(in.name()), "': shape ", ShapeStr(in.shape()),
                              " needs ", nbytes, " bytes, above the limit of ",
                              limits.max_input_bytes));
    InputTensor& it = by_index[idx];
    it.name = t.name;
    it.dtype = t.dtype;
    it.shape = std::move(shape);
    const bool typed = HasTypedContents(in);
    ASSIGN_OR_RETURN(std::optional<ShmRef> ref,
                     ShmRefOf(in.parameters(), absl::StrCat("input '", Echo(in.name()), "'")));
    const std::string* raw_entry = nullptr;
    if (raw && !(raw_skips_shm && ref))
      raw_entry = &req.raw_input_contents(raw_skips_shm ? next_raw++ : i);
    if (ref) {
      if (typed || (raw_entry != nullptr && !raw_entry->empty()))
        return Bad(absl::StrCat("input '", Echo(in.name()), "' is in shared-memory region '",
                                Echo(ref->region), "' and also carries data"));
      RETURN_IF_ERROR(ReadShmInput(shm, *ref, in.name(), nbytes, &it.owned));
      it.data = it.owned;
    } else if (raw && typed) {
      return Bad(absl::StrCat("input '", Echo(in.name()),
                              "' has typed contents while the request uses raw_input_contents"));
    } else if (raw) {
      const std::string& bytes = *raw_entry;
      if (static_cast<int64_t>(bytes.size()) != nbytes)
        return Bad(absl::StrCat("input '", Echo(in.name()), "': raw data has ", bytes.size(),
                                " bytes, shape ", ShapeStr(in.shape()), " of ",
                                t.dtype.KServeName(), " needs ", nbytes));
      it.data = bytes;
    } else if (typed) {
      RETURN_IF_ERROR(TypedToRaw(in, t.dtype, *numel, &it.owned));
      it.data = it.owned;
    } else {
      return Bad(absl::StrCat("input '", Echo(in.name()), "' has no data"));
    }
  }
  for (size_t k = 0; k < spec.inputs.size(); ++k)
    if (!present[k])
      return Bad(absl::StrCat("missing input '", spec.inputs[k].name, "' for model '",
                              spec.name, "'"));
  r->inputs = std::move(by_index);
  // `it.data` may point into `it.owned`: re-point after the move of the
  // vector elements (std::string moves may relocate small buffers).
  for (size_t k = 0; k < r->inputs.size(); ++k)
    if (!r->inputs[k].owned.empty()) r->inputs[k].data = r->inputs[k].owned;
  r->batch = batched ? batch : 1;
  r->shape_key = ShapeKey(r->inputs, batched);

  std::set<std::string> asked;
  for (const auto& o : req.outputs()) {
    if (!spec.FindOutput(o.name())) {
      std::vector<std::string> names;
      for (const TensorSpec& t : spec.outputs) names.push_back(t.name);
      return Bad(absl::StrCat("unknown output '", Echo(o.name()), "' for model '", spec.name,
                              "' (outputs: ", absl::StrJoin(names, ", "), ")"));
    }
    if (!asked.insert(o.name()).second)
      return Bad(absl::StrCat("output '", Echo(o.name()), "' is requested twice"));
    if (o.parameters().count("classification"))
      return Bad("output parameter 'classification' is not supported");
    ASSIGN_OR_RETURN(std::optional<ShmRef> ref,
                     ShmRefOf(o.parameters(), absl::StrCat("output '", Echo(o.name()), "'")));
    if (ref) {
      ASSIGN_OR_RETURN(ShmOutputSlot slot, ResolveShmOutput(shm, *ref, o.name()));
      out.shm_outputs.push_back(std::move(slot));
    }
    r->outputs.push_back(o.name());
  }
  if (r->outputs.empty())
    for (const TensorSpec& t : spec.outputs) r->outputs.push_back(t.name);
  out.request = std::move(r);
  return out;
}

void EncodeInferResponse(InferResult&& result, const std::string& model,
                         const std::string& version, const std::string& id,
                         inference::ModelInferResponse* resp) {
  resp->set_model_name(model);
  resp->set_model_version(version);
  resp->set_id(id);
  for (OutputTensor& o : result.outputs) {
    auto* out = resp->add_outputs();
    out->set_name(o.name);
    out->set_datatype(o.dtype.KServeName());
    for (int64_t d : o.shape) out->add_shape(d);
    resp->add_raw_output_contents(std::move(o.data));
  }
}

}  // namespace kiln
