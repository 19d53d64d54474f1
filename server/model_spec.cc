#include "server/model_spec.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace kiln {
namespace {

constexpr int64_t kMaxBatchLimit = 1 << 16;
constexpr int kMaxInstances = 64;  // per model, all instance groups together
constexpr int kMaxThreads = 256;   // per instance
constexpr int kMaxModelThreads = 1024;  // per model, all instances together
constexpr char kThreadsKey[] = "intra_op_thread_count";

// Collects TextFormat errors; rewrites "no field named" into an error that
// says kiln does not support the field and lists what it does support.
class ConfigErrors : public google::protobuf::io::ErrorCollector {
 public:
  explicit ConfigErrors(std::string filename) : filename_(std::move(filename)) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!first_.empty()) return;
    first_ = absl::StrCat(filename_, ":", line + 1, ":", column + 1, ": ", Explain(message));
  }
  const std::string& first() const { return first_; }

 private:
  static std::string Explain(const std::string& message) {
    // protobuf: Message type "inference.X" has no field named "y".
    const std::string kType = "Message type \"", kField = "has no field named \"";
    size_t t = message.find(kType), f = message.find(kField);
    if (t == std::string::npos || f == std::string::npos) return message;
    size_t t_end = message.find('"', t + kType.size());
    size_t f_end = message.find('"', f + kField.size());
    if (t_end == std::string::npos || f_end == std::string::npos) return message;
    std::string type = message.substr(t + kType.size(), t_end - t - kType.size());
    std::string field = message.substr(f + kField.size(), f_end - f - kField.size());
    std::vector<std::string> supported;
    if (const auto* d =
            google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type)) {
      for (int i = 0; i < d->field_count(); ++i) supported.push_back(d->field(i)->name());
    }
    std::string short_type = type.substr(type.rfind('.') + 1);
    return absl::StrCat("field '", field, "' of ", short_type,
                        " is not supported by kiln (supported: ",
                        absl::StrJoin(supported, ", "), ")");
  }

  std::string filename_;
  std::string first_;
};

absl::Status Invalid(const std::string& model, const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat("model '", model, "': ", msg));
}

absl::StatusOr<TensorSpec> TensorFromConfig(const std::string& model, const std::string& kind,
                                            const std::string& name, inference::DataType type,
                                            const google::protobuf::RepeatedField<int64_t>& dims) {
  if (name.empty()) return Invalid(model, absl::StrCat("an ", kind, " has no name"));
  TensorSpec t;
  t.name = name;
  if (type == inference::TYPE_STRING)
    return Invalid(model, absl::StrCat(kind, " '", name,
                                       "': TYPE_STRING (BYTES) tensors are not supported"));
  std::optional<DType> dt = DTypeFromConfig(type);
  if (!dt) return Invalid(model, absl::StrCat(kind, " '", name, "' has no valid data_type"));
  t.dtype = *dt;
  for (int64_t d : dims) {
    if (d != -1 && d < 1)
      return Invalid(model, absl::StrCat(kind, " '", name, "': dim ", d,
                                         " is invalid (use -1 for a variable dim)"));
    t.dims.push_back(d);
  }
  return t;
}

absl::StatusOr<QueuePolicy> PolicyFromConfig(const inference::ModelQueuePolicy& p) {
  QueuePolicy q;
  q.delay_on_timeout = p.timeout_action() == inference::ModelQueuePolicy::DELAY;
  if (p.default_timeout_microseconds() > uint64_t{1} << 40)
    return absl::InvalidArgumentError("default_timeout_microseconds is too large");
  q.default_timeout = absl::Microseconds(static_cast<int64_t>(p.default_timeout_microseconds()));
  q.allow_timeout_override = p.allow_timeout_override();
  q.max_queue_size = p.max_queue_size();
  return q;
}

absl::Status BatchingFromConfig(const inference::ModelDynamicBatching& db, ModelSpec* spec) {
  const std::string& m = spec->name;
  if (spec->max_batch_size == 0)
    return Invalid(m, "dynamic_batching needs max_batch_size > 0");
  BatchingSpec& b = spec->batching;
  b.dynamic = true;
  for (int32_t p : db.preferred_batch_size()) {
    if (p < 1 || p > spec->max_batch_size)
      return Invalid(m, absl::StrCat("preferred_batch_size ", p, " is outside [1, ",
                                     spec->max_batch_size, "]"));
    b.preferred.push_back(p);
  }
  std::sort(b.preferred.begin(), b.preferred.end());
  b.preferred.erase(std::unique(b.preferred.begin(), b.preferred.end()), b.preferred.end());
  if (db.max_queue_delay_microseconds() > uint64_t{1} << 40)
    return Invalid(m, "max_queue_delay_microseconds is too large");
  b.max_queue_delay = absl::Microseconds(static_cast<int64_t>(db.max_queue_delay_microseconds()));
  if (db.priority_levels() > 1000) return Invalid(m, "priority_levels above 1000");
  b.priority_levels = db.priority_levels() == 0 ? 1 : static_cast<int>(db.priority_levels());
  b.default_priority = db.default_priority_level() == 0
                           ? b.priority_levels
                           : static_cast<int>(db.default_priority_level());
  if (db.default_priority_level() > static_cast<uint64_t>(b.priority_levels))
    return Invalid(m, absl::StrCat("default_priority_level ", db.default_priority_level(),
                                   " is outside [1, ", b.priority_levels, "]"));
  auto dp = PolicyFromConfig(db.default_queue_policy());
  if (!dp.ok()) return Invalid(m, std::string(dp.status().message()));
  b.default_policy = *dp;
  for (const auto& [level, policy] : db.priority_queue_policy()) {
    if (level < 1 || level > static_cast<uint64_t>(b.priority_levels))
      return Invalid(m, absl::StrCat("priority_queue_policy level ", level, " is outside [1, ",
                                     b.priority_levels, "]"));
    auto p = PolicyFromConfig(policy);
    if (!p.ok()) return Invalid(m, std::string(p.status().message()));
    b.level_policy[static_cast<int>(level)] = *p;
  }
  if (db.preserve_ordering() && spec->instance_count > 1)
    return Invalid(m, "preserve_ordering needs a single instance (instance_group count 1)");
  return absl::OkStatus();
}

// Merges config dims `want` (full, batch included) with the model's `have`.
absl::StatusOr<std::vector<int64_t>> MergeDims(const std::string& model, const std::string& what,
                                               const std::vector<int64_t>& want,
                                               const std::vector<int64_t>& have) {
  if (want.size() != have.size())
    return Invalid(model, absl::StrCat(what, " has rank ", want.size(), " in the config but ",
                                       have.size(), " in the model file"));
  std::vector<int64_t> out = want;
  for (size_t i = 0; i < want.size(); ++i) {
    if (have[i] == -1) continue;
    if (want[i] == -1) {
      out[i] = have[i];
    } else if (want[i] != have[i]) {
      return Invalid(model, absl::StrCat(what, " dim ", i, " is ", want[i],
                                         " in the config but ", have[i], " in the model file"));
    }
  }
  return out;
}

absl::Status CompleteTensors(const std::string& model, const std::string& kind,
                             int64_t max_batch, const std::vector<TensorSpec>& have,
                             bool all_required, std::vector<TensorSpec>* want) {
  if (want->empty()) {
    for (const TensorSpec& h : have) {
      TensorSpec t = h;
      if (max_batch > 0) {
        if (t.dims.empty() || t.dims[0] != -1)
          return Invalid(model, absl::StrCat("max_batch_size > 0 but ", kind, " '", t.name,
                                             "' has no variable first (batch) dim in the model"));
        t.dims.erase(t.dims.begin());
      }
      want->push_back(t);
    }
    return absl::OkStatus();
  }
  for (TensorSpec& w : *want) {
    auto it = std::find_if(have.begin(), have.end(),
                           [&](const TensorSpec& h) { return h.name == w.name; });
    if (it == have.end())
      return Invalid(model, absl::StrCat(kind, " '", w.name, "' is not in the model file"));
    if (it->dtype != w.dtype)
      return Invalid(model, absl::StrCat(kind, " '", w.name, "' is ", w.dtype.KServeName(),
                                         " in the config but ", it->dtype.KServeName(),
                                         " in the model file"));
    std::vector<int64_t> full = w.dims;
    if (max_batch > 0) full.insert(full.begin(), -1);
    std::string what = absl::StrCat(kind, " '", w.name, "'");
    ASSIGN_OR_RETURN(std::vector<int64_t> merged, MergeDims(model, what, full, it->dims));
    if (max_batch > 0) {
      if (it->dims.empty() || it->dims[0] != -1)
        return Invalid(model, absl::StrCat("max_batch_size > 0 but ", what,
                                           " has a fixed first dim in the model file"));
      merged.erase(merged.begin());
    }
    w.dims = merged;
  }
  if (all_required) {
    for (const TensorSpec& h : have) {
      bool listed = std::any_of(want->begin(), want->end(),
                                [&](const TensorSpec& w) { return w.name == h.name; });
      if (!listed)
        return Invalid(model, absl::StrCat("model input '", h.name,
                                           "' is missing from the config"));
    }
  }
  return absl::OkStatus();
}

void WriteTensorsToConfig(const ModelSpec& spec, inference::ModelConfig* c) {
  c->clear_input();
  c->clear_output();
  for (const TensorSpec& t : spec.inputs) {
    auto* in = c->add_input();
    in->set_name(t.name);
    in->set_data_type(ConfigDataType(t.dtype));
    for (int64_t d : t.dims) in->add_dims(d);
  }
  for (const TensorSpec& t : spec.outputs) {
    auto* out = c->add_output();
    out->set_name(t.name);
    out->set_data_type(ConfigDataType(t.dtype));
    for (int64_t d : t.dims) out->add_dims(d);
  }
}

absl::Status CheckWarmups(ModelSpec* spec) {
  for (WarmupSpec& w : spec->warmups) {
    for (const auto& [name, in] : w.inputs) {
      const TensorSpec* t = spec->FindInput(name);
      if (!t) return Invalid(spec->name, absl::StrCat("warm-up '", w.name, "' names unknown input '", name, "'"));
      if (t->dtype != in.dtype)
        return Invalid(spec->name, absl::StrCat("warm-up '", w.name, "' input '", name,
                                                "' has the wrong data_type"));
      if (in.dims.size() != t->dims.size())
        return Invalid(spec->name, absl::StrCat("warm-up '", w.name, "' input '", name,
                                                "' has the wrong rank"));
      for (size_t i = 0; i < in.dims.size(); ++i)
        if (in.dims[i] < 1 || (t->dims[i] != -1 && t->dims[i] != in.dims[i]))
          return Invalid(spec->name, absl::StrCat("warm-up '", w.name, "' input '", name,
                                                  "' dim ", i, " does not fit the input"));
    }
    for (const TensorSpec& t : spec->inputs)
      if (!w.inputs.count(t.name))
        return Invalid(spec->name, absl::StrCat("warm-up '", w.name, "' lacks input '", t.name, "'"));
  }
  return absl::OkStatus();
}

// The backend parameters kiln reads: "intra_op_thread_count", an integer
// in [0, kMaxThreads] (0: not set), as in Triton's onnxruntime backend.
// Others are refused by name, so a misspelt key is not silently ignored.
absl::Status ParametersFromConfig(const inference::ModelConfig& c, const std::string& dir_name,
                                  ModelSpec* s) {
  for (const auto& [key, value] : c.parameters()) {
    if (key != kThreadsKey)
      return Invalid(dir_name, absl::StrCat("parameters key '", key,
                                            "' is not supported (kiln reads: ", kThreadsKey,
                                            ")"));
    const std::string& v = value.string_value();
    int64_t n = -1;
    if (!absl::SimpleAtoi(v, &n) || n < 0 || n > kMaxThreads)
      return Invalid(dir_name, absl::StrCat(kThreadsKey, " '", v, "' is not an integer in [0, ",
                                            kMaxThreads, "]"));
    if (n * s->instance_count > kMaxModelThreads)
      return Invalid(dir_name, absl::StrCat(kThreadsKey, " ", n, " x ", s->instance_count,
                                            " instances is more than ", kMaxModelThreads,
                                            " threads"));
    s->threads = static_cast<int>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> VersionPolicy::Select(const std::vector<int64_t>& available) const {
  std::vector<int64_t> v = available;
  std::sort(v.begin(), v.end());
  switch (kind) {
    case kAll:
      return v;
    case kSpecific: {
      std::vector<int64_t> out;
      for (int64_t x : v)
        if (specific.count(x)) out.push_back(x);
      return out;
    }
    case kLatest:
    default: {
      size_t n = std::min<size_t>(latest, v.size());
      return std::vector<int64_t>(v.end() - n, v.end());
    }
  }
}

const TensorSpec* ModelSpec::FindInput(const std::string& n) const {
  for (const TensorSpec& t : inputs)
    if (t.name == n) return &t;
  return nullptr;
}

const TensorSpec* ModelSpec::FindOutput(const std::string& n) const {
  for (const TensorSpec& t : outputs)
    if (t.name == n) return &t;
  return nullptr;
}

std::vector<int64_t> ModelSpec::FullDims(const TensorSpec& t, int64_t batch) const {
  std::vector<int64_t> d = t.dims;
  if (max_batch_size > 0) d.insert(d.begin(), batch);
  return d;
}

absl::StatusOr<inference::ModelConfig> ParseModelConfigText(const std::string& text,
                                                            const std::string& filename) {
  inference::ModelConfig config;
  google::protobuf::TextFormat::Parser parser;
  ConfigErrors errors(filename);
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    return absl::InvalidArgumentError(
        errors.first().empty() ? absl::StrCat(filename, ": cannot parse") : errors.first());
  }
  return config;
}

absl::StatusOr<ModelSpec> ModelSpecFromConfig(const inference::ModelConfig& c,
                                              const std::string& dir_name) {
  ModelSpec s;
  s.name = dir_name;
  if (!c.name().empty() && c.name() != dir_name)
    return Invalid(dir_name, absl::StrCat("config name '", c.name(),
                                          "' differs from the directory name"));
  const std::string& p = c.platform();
  if (!p.empty() && p != "onnxruntime_onnx" && p != "onnx")
    return Invalid(dir_name, absl::StrCat("platform '", p,
                                          "' is not supported (kiln runs ONNX models: "
                                          "use onnxruntime_onnx)"));
  const std::string& b = c.backend();
  if (!b.empty() && b != "onnxruntime" && b != "onnx" && b != "kiln")
    return Invalid(dir_name, absl::StrCat("backend '", b,
                                          "' is not supported (use onnxruntime, onnx or kiln)"));
  s.platform = "onnxruntime_onnx";
  if (c.max_batch_size() < 0 || c.max_batch_size() > kMaxBatchLimit)
    return Invalid(dir_name, absl::StrCat("max_batch_size ", c.max_batch_size(),
                                          " is outside [0, ", kMaxBatchLimit, "]"));
  s.max_batch_size = c.max_batch_size();
  std::set<std::string> seen;
  for (const auto& in : c.input()) {
    ASSIGN_OR_RETURN(TensorSpec t,
                     TensorFromConfig(dir_name, "input", in.name(), in.data_type(), in.dims()));
    if (!seen.insert("i:" + t.name).second)
      return Invalid(dir_name, absl::StrCat("input '", t.name, "' is listed twice"));
    s.inputs.push_back(t);
  }
  for (const auto& out : c.output()) {
    ASSIGN_OR_RETURN(TensorSpec t, TensorFromConfig(dir_name, "output", out.name(),
                                                    out.data_type(), out.dims()));
    if (!seen.insert("o:" + t.name).second)
      return Invalid(dir_name, absl::StrCat("output '", t.name, "' is listed twice"));
    s.outputs.push_back(t);
  }
  // Instances. Each is a runner, a JIT and a batcher thread, so the total
  // is bounded, not only each group: a config of many groups asked for
  // thousands of threads (the bound tests/fuzz/config_fuzz.cc checks).
  int count = 0;
  std::string device;
  for (const auto& g : c.instance_group()) {
    if (g.count() < 0 || g.count() > kMaxInstances)
      return Invalid(dir_name, absl::StrCat("instance_group count ", g.count(),
                                            " is outside [0, ", kMaxInstances, "]"));
    count += g.count() == 0 ? 1 : g.count();
    if (count > kMaxInstances)
      return Invalid(dir_name, absl::StrCat("the instance groups add up to more than ",
                                            kMaxInstances, " instances"));
    std::string d;
    if (g.kind() == inference::ModelInstanceGroup::KIND_CPU) d = "CPU";
    if (g.kind() == inference::ModelInstanceGroup::KIND_GPU) d = "GPU";
    if (!device.empty() && d != device)
      return Invalid(dir_name, "instance groups of different kinds are not supported");
    device = d;
  }
  s.instance_count = count == 0 ? 1 : count;
  s.device = device;
  RETURN_IF_ERROR(ParametersFromConfig(c, dir_name, &s));
  if (c.has_dynamic_batching()) RETURN_IF_ERROR(BatchingFromConfig(c.dynamic_batching(), &s));
  // Versions.
  if (c.version_policy().has_all()) {
    s.version_policy.kind = VersionPolicy::kAll;
  } else if (c.version_policy().has_specific()) {
    s.version_policy.kind = VersionPolicy::kSpecific;
    for (int64_t v : c.version_policy().specific().versions()) {
      if (v < 0) return Invalid(dir_name, "negative version in version_policy");
      s.version_policy.specific.insert(v);
    }
  } else if (c.version_policy().has_latest()) {
    s.version_policy.latest = std::max<uint32_t>(1, c.version_policy().latest().num_versions());
  }
  if (!c.default_model_filename().empty()) {
    const std::string& f = c.default_model_filename();
    if (f.find('/') != std::string::npos || f == "." || f == "..")
      return Invalid(dir_name, "default_model_filename must be a plain file name");
    s.model_filename = f;
  }
  for (const auto& w : c.model_warmup()) {
    WarmupSpec ws;
    ws.name = w.name().empty() ? "warmup" : w.name();
    ws.batch_size = w.batch_size() == 0 ? 1 : w.batch_size();
    if (s.max_batch_size == 0 && ws.batch_size != 1)
      return Invalid(dir_name, "warm-up batch_size must be 1 when max_batch_size is 0");
    if (s.max_batch_size > 0 && ws.batch_size > s.max_batch_size)
      return Invalid(dir_name, "warm-up batch_size exceeds max_batch_size");
    ws.count = w.count() == 0 ? 1 : static_cast<int>(std::min<uint32_t>(w.count(), 100));
    for (const auto& [name, in] : w.inputs()) {
      WarmupInput wi;
      std::optional<DType> dt = DTypeFromConfig(in.data_type());
      if (!dt) return Invalid(dir_name, absl::StrCat("warm-up input '", name, "' has no valid data_type"));
      wi.dtype = *dt;
      wi.dims.assign(in.dims().begin(), in.dims().end());
      wi.random = in.has_random_data();
      ws.inputs[name] = wi;
    }
    s.warmups.push_back(std::move(ws));
  }
  s.config = c;
  s.config.set_name(dir_name);
  s.config.set_platform(s.platform);
  s.config.set_backend("kiln");
  s.config.set_default_model_filename(s.model_filename);
  return s;
}

absl::Status CompleteSpecFromModel(const ModelSignature& sig, ModelSpec* spec) {
  RETURN_IF_ERROR(CompleteTensors(spec->name, "input", spec->max_batch_size, sig.inputs,
                                  /*all_required=*/true, &spec->inputs));
  RETURN_IF_ERROR(CompleteTensors(spec->name, "output", spec->max_batch_size, sig.outputs,
                                  /*all_required=*/false, &spec->outputs));
  if (spec->inputs.empty()) return Invalid(spec->name, "the model has no inputs");
  if (spec->outputs.empty()) return Invalid(spec->name, "the model has no outputs");
  RETURN_IF_ERROR(CheckWarmups(spec));
  WriteTensorsToConfig(*spec, &spec->config);
  return absl::OkStatus();
}

absl::StatusOr<ModelSpec> DeriveModelSpec(const ModelSignature& sig, const std::string& name,
                                          int64_t default_max_batch) {
  bool batchable = default_max_batch > 0 && !sig.inputs.empty();
  for (const auto* list : {&sig.inputs, &sig.outputs})
    for (const TensorSpec& t : *list)
      if (t.dims.empty() || t.dims[0] != -1) batchable = false;
  inference::ModelConfig c;
  c.set_name(name);
  if (batchable) {
    c.set_max_batch_size(static_cast<int32_t>(default_max_batch));
    c.mutable_dynamic_batching();
  }
  ASSIGN_OR_RETURN(ModelSpec spec, ModelSpecFromConfig(c, name));
  spec.derived = true;
  RETURN_IF_ERROR(CompleteSpecFromModel(sig, &spec));
  return spec;
}

std::optional<DType> DTypeFromConfig(inference::DataType t) {
  switch (t) {
    case inference::TYPE_BOOL: return dtypes::kBool;
    case inference::TYPE_UINT8: return dtypes::kUInt8;
    case inference::TYPE_UINT16: return dtypes::kUInt16;
    case inference::TYPE_UINT32: return dtypes::kUInt32;
    case inference::TYPE_UINT64: return dtypes::kUInt64;
    case inference::TYPE_INT8: return dtypes::kInt8;
    case inference::TYPE_INT16: return dtypes::kInt16;
    case inference::TYPE_INT32: return dtypes::kInt32;
    case inference::TYPE_INT64: return dtypes::kInt64;
    case inference::TYPE_FP16: return dtypes::kFloat16;
    case inference::TYPE_FP32: return dtypes::kFloat32;
    case inference::TYPE_FP64: return dtypes::kFloat64;
    case inference::TYPE_BF16: return dtypes::kBFloat16;
    default: return std::nullopt;
  }
}

inference::DataType ConfigDataType(DType t) {
  switch (t.scalar) {
    case ScalarType::kBool: return inference::TYPE_BOOL;
    case ScalarType::kUInt8: return inference::TYPE_UINT8;
    case ScalarType::kUInt16: return inference::TYPE_UINT16;
    case ScalarType::kUInt32: return inference::TYPE_UINT32;
    case ScalarType::kUInt64: return inference::TYPE_UINT64;
    case ScalarType::kInt8: return inference::TYPE_INT8;
    case ScalarType::kInt16: return inference::TYPE_INT16;
    case ScalarType::kInt32: return inference::TYPE_INT32;
    case ScalarType::kInt64: return inference::TYPE_INT64;
    case ScalarType::kFloat16: return inference::TYPE_FP16;
    case ScalarType::kFloat32: return inference::TYPE_FP32;
    case ScalarType::kFloat64: return inference::TYPE_FP64;
    case ScalarType::kBFloat16: return inference::TYPE_BF16;
    default: return inference::TYPE_INVALID;
  }
}

std::optional<int64_t> CheckedNumel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

int InstanceThreads(const ModelSpec& spec, int cores) {
  if (spec.threads > 0) return spec.threads;
  if (spec.instance_count <= 1) return 0;
  return std::max(1, cores / spec.instance_count);
}

}  // namespace kiln
