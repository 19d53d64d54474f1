#include "engine/onnx/op_context.h"

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/onnx/graph_builder.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {

using onnx::AttributeProto;

OnnxValue OnnxValue::FromTensor(Tensor t) {
  OnnxValue v;
  v.kind = Kind::kTensor;
  v.tensor = std::move(t);
  return v;
}

OnnxValue OnnxValue::FromHost(HostTensor h) {
  OnnxValue v;
  v.kind = Kind::kTensor;
  v.host = std::make_shared<const HostTensor>(std::move(h));
  return v;
}

DType OnnxValue::dtype() const {
  if (host) return host->dtype;
  if (tensor) return tensor->dtype();
  return elem_type;
}

Shape OnnxValue::shape() const {
  if (host) return host->shape;
  if (tensor) return tensor->shape();
  return {};
}

absl::StatusOr<int64_t> NormAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return absl::InvalidArgumentError(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  return a;
}

OpContext::OpContext(const onnx::NodeProto& node, int opset, GraphBuilder* builder,
                     std::vector<const OnnxValue*> inputs)
    : node_(node), opset_(opset), builder_(builder), inputs_(std::move(inputs)) {
  outputs_.resize(node.output_size());
}

const std::string& OpContext::op_type() const { return node_.op_type(); }
Engine* OpContext::engine() const { return builder_->engine(); }
const std::string& OpContext::device() const { return builder_->device(); }

bool OpContext::Has(int i) const {
  return i >= 0 && i < num_inputs() && inputs_[i] != nullptr &&
         inputs_[i]->kind != OnnxValue::Kind::kNone;
}

const OnnxValue& OpContext::Raw(int i) const {
  static const OnnxValue kNone;
  return Has(i) ? *inputs_[i] : kNone;
}

absl::StatusOr<Tensor> OpContext::In(int i) const {
  if (!Has(i)) return absl::InvalidArgumentError(absl::StrCat("input ", i, " is missing"));
  const OnnxValue& v = *inputs_[i];
  if (!v.is_tensor())
    return absl::InvalidArgumentError(absl::StrCat("input ", i, " is not a tensor"));
  if (v.tensor) return *v.tensor;
  return v.host->ToTensor(engine(), device());
}

const HostTensor* OpContext::Host(int i) const {
  if (!Has(i) || !inputs_[i]->is_tensor()) return nullptr;
  return inputs_[i]->host.get();
}

absl::StatusOr<HostTensor> OpContext::Static(int i) const {
  if (const HostTensor* h = Host(i)) return *h;
  ASSIGN_OR_RETURN(Tensor t, In(i));
  // Values read on the host (shapes, indices, boxes, ...) are bounded: a
  // hostile input could otherwise make a huge host copy.
  if (t.numel() > kMaxHostElements)
    return absl::ResourceExhaustedError(absl::StrCat(
        "input ", i, " has ", t.numel(), " elements, too many to read on the host (more than ",
        kMaxHostElements, ")"));
  return builder_->ReadOnHost(std::move(t));
}

absl::StatusOr<std::vector<int64_t>> OpContext::StaticInts(int i) const {
  ASSIGN_OR_RETURN(HostTensor h, Static(i));
  return h.Int64s();
}

absl::StatusOr<std::vector<double>> OpContext::StaticDoubles(int i) const {
  ASSIGN_OR_RETURN(HostTensor h, Static(i));
  return h.Doubles();
}

DType OpContext::Type(int i) const { return Raw(i).dtype(); }
Shape OpContext::ShapeOf(int i) const { return Raw(i).shape(); }

absl::Status OpContext::CheckInputs(int lo, int hi) const {
  if (num_inputs() < lo || num_inputs() > hi) {
    std::string want = lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, " to ", hi);
    return absl::InvalidArgumentError(
        absl::StrCat("expects ", want, " inputs, got ", num_inputs()));
  }
  for (int i = 0; i < lo; ++i)
    if (!Has(i)) return absl::InvalidArgumentError(absl::StrCat("required input ", i, " is missing"));
  return absl::OkStatus();
}

int OpContext::num_outputs() const { return node_.output_size(); }
bool OpContext::Wants(int i) const {
  return i >= 0 && i < num_outputs() && !node_.output(i).empty();
}
void OpContext::Set(int i, Tensor t) {
  if (i < num_outputs()) outputs_[i] = OnnxValue::FromTensor(std::move(t));
}
void OpContext::SetHost(int i, HostTensor h) {
  if (i < num_outputs()) outputs_[i] = OnnxValue::FromHost(std::move(h));
}
void OpContext::SetValue(int i, OnnxValue v) {
  if (i < num_outputs()) outputs_[i] = std::move(v);
}

const AttributeProto* OpContext::Attr(const std::string& name) const {
  read_attrs_.insert(name);
  for (const AttributeProto& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

const AttributeProto* OpContext::Typed(const std::string& name, int type) const {
  const AttributeProto* a = Attr(name);
  if (a == nullptr) return nullptr;
  if (a->type() != type && a->type() != AttributeProto::UNDEFINED) {
    if (attr_error_.ok())
      attr_error_ = absl::InvalidArgumentError(absl::StrCat(
          "attribute '", name, "' has type ",
          AttributeProto::AttributeType_Name(a->type()), ", expected ",
          AttributeProto::AttributeType_Name(static_cast<AttributeProto::AttributeType>(type))));
    return nullptr;
  }
  return a;
}

int64_t OpContext::Int(const std::string& name, int64_t def) const {
  const AttributeProto* a = Typed(name, AttributeProto::INT);
  return a ? a->i() : def;
}
float OpContext::Float(const std::string& name, float def) const {
  const AttributeProto* a = Typed(name, AttributeProto::FLOAT);
  return a ? a->f() : def;
}
std::string OpContext::Str(const std::string& name, const std::string& def) const {
  const AttributeProto* a = Typed(name, AttributeProto::STRING);
  return a ? a->s() : def;
}
std::vector<int64_t> OpContext::Ints(const std::string& name) const {
  const AttributeProto* a = Typed(name, AttributeProto::INTS);
  if (!a) return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}
std::vector<float> OpContext::Floats(const std::string& name) const {
  const AttributeProto* a = Typed(name, AttributeProto::FLOATS);
  if (!a) return {};
  return std::vector<float>(a->floats().begin(), a->floats().end());
}
std::vector<std::string> OpContext::Strs(const std::string& name) const {
  const AttributeProto* a = Typed(name, AttributeProto::STRINGS);
  if (!a) return {};
  return std::vector<std::string>(a->strings().begin(), a->strings().end());
}
const onnx::TensorProto* OpContext::TensorAttr(const std::string& name) const {
  const AttributeProto* a = Typed(name, AttributeProto::TENSOR);
  return a ? &a->t() : nullptr;
}
const onnx::GraphProto* OpContext::Graph(const std::string& name) const {
  const AttributeProto* a = Typed(name, AttributeProto::GRAPH);
  return a ? &a->g() : nullptr;
}

}  // namespace kiln
