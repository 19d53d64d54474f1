#include "engine/onnx/model.h"

#include <cstring>
#include <new>
#include <set>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/onnx/derived_weights.h"
#include "engine/onnx/graph_check.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/ops_common.h"
#include "engine/onnx/prepack.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {
namespace {

ValueInfo InfoFromProto(const onnx::ValueInfoProto& p) {
  ValueInfo info;
  info.name = p.name();
  const onnx::TypeProto* type = &p.type();
  if (type->has_optional_type()) {
    info.is_optional = true;
    type = &type->optional_type().elem_type();
  }
  if (type->has_sequence_type()) {
    info.is_sequence = true;
    type = &type->sequence_type().elem_type();
  }
  if (!type->has_tensor_type()) {
    info.dtype = dtypes::kVoid;
    info.rank_known = false;
    return info;
  }
  const auto& tt = type->tensor_type();
  info.dtype = DTypeFromOnnx(tt.elem_type()).value_or(dtypes::kVoid);
  if (!tt.has_shape()) {
    info.rank_known = false;
    return info;
  }
  for (const auto& d : tt.shape().dim()) {
    info.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    info.dim_params.push_back(d.has_dim_param() ? d.dim_param() : "");
  }
  return info;
}

std::string DimsStr(const std::vector<int64_t>& dims) {
  std::vector<std::string> parts;
  for (int64_t d : dims) parts.push_back(d < 0 ? "?" : absl::StrCat(d));
  return absl::StrCat("(", absl::StrJoin(parts, ","), ")");
}

absl::Status OutOfMemory(const std::string& what, const std::exception& e) {
  return absl::ResourceExhaustedError(
      absl::StrCat("out of memory ", what, " (", e.what(), ")"));
}

// A constant's value, failing when its upload failed.
absl::StatusOr<OnnxValue> Checked(OnnxValue v) {
  if (v.tensor && !v.tensor->ok()) return v.tensor->status();
  return v;
}
absl::StatusOr<OnnxValue> CheckedConstant(HostTensor h, Engine* e, const std::string& device) {
  return Checked(ConstantValue(std::move(h), e, device));
}

// An initializer's value: raw_data and external data go to the device
// straight from the proto / file bytes (no host copy of large weights). A
// 2-D weight `transpose` names (prepack.h) is uploaded transposed.
absl::StatusOr<OnnxValue> InitializerValue(const onnx::TensorProto& t, const std::string& base_dir,
                                           Engine* e, const std::string& device,
                                           bool transpose) {
  // A (rows, cols) matrix of `dt` at `data`, uploaded as (cols, rows).
  auto transposed = [&](DType dt, const Shape& s, const void* data) {
    std::string packed = TransposeBytes(data, s[0], s[1], static_cast<size_t>(dt.ItemSize()));
    return Checked(ConstantValue(dt, {s[1], s[0]}, packed, e, device));
  };
  ASSIGN_OR_RETURN(std::optional<TensorBytes> b, TensorBytesFromProto(t, base_dir));
  if (b && transpose && b->shape.size() == 2) return transposed(b->dtype, b->shape, b->bytes.data());
  if (b) return Checked(ConstantValue(b->dtype, std::move(b->shape), b->bytes, e, device));
  ASSIGN_OR_RETURN(HostTensor h, HostTensorFromProto(t, base_dir));
  if (transpose && h.shape.size() == 2) return transposed(h.dtype, h.shape, h.data.data());
  return CheckedConstant(std::move(h), e, device);
}

}  // namespace

OnnxModel::~OnnxModel() = default;

size_t OnnxModel::derived_weights() const { return derived_ ? derived_->size() : 0; }

absl::StatusOr<std::unique_ptr<OnnxModel>> OnnxModel::Load(const std::string& path,
                                                          Engine* engine,
                                                          const std::string& device) {
  // Sizes are checked before they are allocated; an allocation that still
  // fails (memory taken by others) is an error, not an abort.
  try {
    return LoadChecked(path, engine, device);
  } catch (const std::bad_alloc& e) {
    return OutOfMemory(absl::StrCat("loading ", path), e);
  } catch (const std::length_error& e) {
    return OutOfMemory(absl::StrCat("loading ", path), e);
  }
}

absl::StatusOr<std::unique_ptr<OnnxModel>> OnnxModel::LoadChecked(const std::string& path,
                                                                 Engine* engine,
                                                                 const std::string& device) {
  auto bytes = ReadFileToString(path);
  if (!bytes.ok()) return bytes.status();
  std::string dir;
  size_t slash = path.rfind('/');
  if (slash != std::string::npos) dir = path.substr(0, slash);
  auto m = LoadFromBytesChecked(*bytes, engine, device, dir);
  if (!m.ok()) return absl::Status(m.status().code(), absl::StrCat(path, ": ", m.status().message()));
  return m;
}

absl::StatusOr<std::unique_ptr<OnnxModel>> OnnxModel::LoadFromBytes(const std::string& bytes,
                                                                   Engine* engine,
                                                                   const std::string& device,
                                                                   const std::string& base_dir) {
  try {
    return LoadFromBytesChecked(bytes, engine, device, base_dir);
  } catch (const std::bad_alloc& e) {
    return OutOfMemory("loading the model", e);
  } catch (const std::length_error& e) {
    return OutOfMemory("loading the model", e);
  }
}

absl::StatusOr<std::unique_ptr<OnnxModel>> OnnxModel::LoadFromBytesChecked(
    const std::string& bytes, Engine* engine, const std::string& device,
    const std::string& base_dir) {
  if (engine == nullptr) return absl::InvalidArgumentError("OnnxModel: no engine");
  std::unique_ptr<OnnxModel> m(new OnnxModel());
  m->engine_ = engine;
  m->device_ = device;
  m->proto_ = std::make_unique<onnx::ModelProto>();
  if (!m->proto_->ParseFromString(bytes))
    return absl::InvalidArgumentError("not a valid ONNX model (ModelProto parse failed)");
  RETURN_IF_ERROR(engine->GetDevice(device).status());
  RETURN_IF_ERROR(m->Init(base_dir));
  return m;
}

absl::Status OnnxModel::Init(const std::string& base_dir) {
  const onnx::ModelProto& mp = *proto_;
  ir_version_ = mp.ir_version();
  if (!mp.has_graph()) return absl::InvalidArgumentError("the model has no graph");
  for (const auto& o : mp.opset_import()) {
    std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    opsets_[domain] = o.version();
  }
  // IR version 2 models had no opset_import: they use ai.onnx version 1.
  if (mp.opset_import_size() == 0) opsets_[""] = 1;
  for (const onnx::FunctionProto& f : mp.functions())
    functions_[absl::StrCat(f.domain(), ":", f.name())] = &f;
  // Structure first (cheap): unknown operators, undefined values, cycles,
  // unsupported input types fail the load, not the first inference.
  RETURN_IF_ERROR(CheckModelGraph(mp, opsets_, functions_));

  // Weight layouts for faster kernels (prepack.h): decided on the nodes
  // here, applied as the weights upload below.
  const std::set<std::string> transposed = PlanPrepack(proto_.get());
  prepacked_ = static_cast<int>(transposed.size());
  derived_ = std::make_unique<DerivedWeights>(&weights_);
  const onnx::GraphProto& g = mp.graph();
  std::set<std::string> init_names;
  for (const onnx::TensorProto& t : g.initializer()) {
    auto v = InitializerValue(t, base_dir, engine_, device_, transposed.count(t.name()) > 0);
    if (!v.ok())
      return absl::Status(v.status().code(),
                          absl::StrCat("initializer '", t.name(), "': ", v.status().message()));
    weights_.Set(t.name(), std::move(*v));
    init_names.insert(t.name());
  }
  for (const onnx::SparseTensorProto& sp : g.sparse_initializer()) {
    absl::StatusOr<HostTensor> h = DenseFromSparse(sp, base_dir);
    if (!h.ok())
      return absl::Status(h.status().code(), absl::StrCat("sparse initializer '",
                                                          sp.values().name(), "': ",
                                                          h.status().message()));
    ASSIGN_OR_RETURN(OnnxValue v, CheckedConstant(std::move(*h), engine_, device_));
    weights_.Set(sp.values().name(), std::move(v));
    init_names.insert(sp.values().name());
  }
  for (const onnx::ValueInfoProto& in : g.input())
    if (!init_names.count(in.name())) inputs_.push_back(InfoFromProto(in));
  for (const onnx::ValueInfoProto& out : g.output()) outputs_.push_back(InfoFromProto(out));
  {
    std::vector<std::string> in_names, out_names;
    std::vector<bool> dynamic_axis0;
    for (const ValueInfo& in : inputs_) {
      in_names.push_back(in.name);
      dynamic_axis0.push_back(!in.is_sequence && !in.is_optional && in.rank_known &&
                              !in.dims.empty() && in.dims[0] < 0);
    }
    for (const ValueInfo& out : outputs_) out_names.push_back(out.name);
    absl::StatusOr<Device*> dev = engine_->GetDevice(device_);
    BatchSplitter::PolicyFn policy = [dev]() {
      return dev.ok() ? BatchSplitter::PolicyFor(**dev)
                      : BatchSplitter::Policy{std::string(dev.status().message())};
    };
    splitter_ = std::make_unique<BatchSplitter>(std::move(in_names), std::move(dynamic_axis0),
                                                std::move(out_names), std::move(policy));
  }

  // Weights held in Constant nodes are decoded and uploaded once, here.
  int64_t opset = opsets_.count("") ? opsets_.at("") : -1;
  for (const onnx::NodeProto& node : g.node()) {
    if (node.op_type() != "Constant" || !(node.domain().empty() || node.domain() == "ai.onnx") ||
        node.output_size() != 1)
      continue;
    auto h = ConstantNodeValue(node, static_cast<int>(opset), base_dir);
    absl::StatusOr<OnnxValue> v = h.ok() ? CheckedConstant(std::move(*h), engine_, device_)
                                         : absl::StatusOr<OnnxValue>(h.status());
    if (!v.ok())
      return absl::Status(v.status().code(),
                          absl::StrCat(NodeLabel(node), ": ", v.status().message()));
    weights_.Set(node.output(0), std::move(*v));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OnnxValue>> OnnxModel::RunValues(
    const std::vector<OnnxValue>& inputs) const {
  return Build(inputs, nullptr);
}

absl::StatusOr<std::vector<OnnxValue>> OnnxModel::Build(const std::vector<OnnxValue>& inputs,
                                                        BatchTracker* tracker) const {
  if (inputs.size() != inputs_.size())
    return absl::InvalidArgumentError(absl::StrCat("the model takes ", inputs_.size(),
                                                   " inputs, got ", inputs.size()));
  Scope scope(&weights_);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueInfo& info = inputs_[i];
    const OnnxValue& v = inputs[i];
    if (v.is_tensor() && !info.is_sequence && !info.is_optional) {
      std::string what = absl::StrCat("input '", info.name, "'");
      if (v.tensor && !v.tensor->ok())
        return absl::InvalidArgumentError(absl::StrCat(what, ": ", v.tensor->status().message()));
      if (info.dtype != dtypes::kVoid && v.dtype() != info.dtype)
        return absl::InvalidArgumentError(absl::StrCat(what, " must be ", info.dtype.Name(),
                                                       ", got ", v.dtype().Name()));
      Shape s = v.shape();
      // As onnxruntime: a declared scalar may come as shape [1].
      if (info.rank_known && info.dims.empty() && s == Shape{1} && v.tensor) {
        scope.Set(info.name, OnnxValue::FromTensor(v.tensor->Reshape({})));
        continue;
      }
      bool ok = !info.rank_known || s.size() == info.dims.size();
      for (size_t d = 0; ok && info.rank_known && d < s.size(); ++d)
        ok = info.dims[d] < 0 || info.dims[d] == s[d];
      if (!ok)
        return absl::InvalidArgumentError(absl::StrCat(what, " must have shape ",
                                                       DimsStr(info.dims), ", got ",
                                                       DimsStr(s)));
    }
    scope.Set(info.name, v);
  }
  GraphBuilder::Options opts;
  opts.engine = engine_;
  opts.device = device_;
  opts.opsets = opsets_;
  opts.functions = functions_;
  opts.derived = derived_.get();
  GraphBuilder builder(opts);
  const onnx::GraphProto& graph = proto_->graph();
  scope.SetLastUses(ComputeLastUses(graph));
  scope.SetReaders(ComputeReaders(graph));
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.op_type() == "Constant" && node.output_size() == 1 &&
        weights_.HasLocal(node.output(0)))
      continue;
    scope.set_now(i);
    RETURN_IF_ERROR(builder.RunNode(node, &scope));
    if (tracker != nullptr) {
      std::vector<const OnnxValue*> ins, outs;
      for (const std::string& name : node.input())
        ins.push_back(name.empty() ? nullptr : scope.Find(name));
      for (const std::string& name : node.output())
        outs.push_back(name.empty() ? nullptr : scope.Find(name));
      tracker->Observe(node, ins, outs);
    }
  }
  std::vector<OnnxValue> outs;
  for (const ValueInfo& o : outputs_) {
    const OnnxValue* v = scope.Find(o.name);
    if (v == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("graph output '", o.name,
                                                     "' is never produced"));
    outs.push_back(*v);
  }
  return outs;
}

absl::StatusOr<std::vector<Tensor>> OnnxModel::Run(const std::vector<Tensor>& inputs) const {
  std::vector<OnnxValue> vals;
  for (const Tensor& t : inputs) vals.push_back(OnnxValue::FromTensor(t));
  ASSIGN_OR_RETURN(std::vector<OnnxValue> outs,
                   splitter_->Run(vals, [this](const std::vector<OnnxValue>& in, BatchTracker* t) {
                     return Build(in, t);
                   }));
  std::vector<Tensor> result;
  for (size_t i = 0; i < outs.size(); ++i) {
    const OnnxValue& v = outs[i];
    if (!v.is_tensor())
      return absl::UnimplementedError(absl::StrCat("graph output '", outputs_[i].name,
                                                   "' is not a tensor (sequence / optional)"));
    result.push_back(v.tensor ? *v.tensor : v.host->ToTensor(engine_, device_));
  }
  return result;
}

std::optional<BatchSplitter::Choice> OnnxModel::BatchChoice(
    const std::vector<Tensor>& inputs) const {
  std::vector<OnnxValue> vals;
  for (const Tensor& t : inputs) vals.push_back(OnnxValue::FromTensor(t));
  return splitter_->ChoiceFor(vals);
}

}  // namespace kiln
