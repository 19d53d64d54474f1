#include "engine/onnx/ops_common.h"

#include <cstring>

#include "absl/strings/str_join.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {

absl::StatusOr<HostTensor> ConstantNodeValue(const onnx::NodeProto& node, int opset,
                                             const std::string& base_dir) {
  (void)opset;
  if (node.attribute_size() != 1)
    return Invalid(absl::StrCat("Constant needs exactly one value attribute, got ",
                                node.attribute_size()));
  const onnx::AttributeProto& a = node.attribute(0);
  const std::string& n = a.name();
  if (n == "value") {
    if (a.type() != onnx::AttributeProto::TENSOR) return Invalid("'value' is not a tensor");
    return HostTensorFromProto(a.t(), base_dir);
  }
  if (n == "value_float") return HostTensor::FromDoubles({a.f()}, {}, dtypes::kFloat32);
  if (n == "value_floats") {
    std::vector<double> v(a.floats().begin(), a.floats().end());
    return HostTensor::FromDoubles(v, {static_cast<int64_t>(v.size())}, dtypes::kFloat32);
  }
  if (n == "value_int") return HostTensor::FromInt64s({a.i()}, {});
  if (n == "value_ints") {
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    return HostTensor::Vector(v);
  }
  if (n == "sparse_value") {
    absl::StatusOr<HostTensor> dense = DenseFromSparse(a.sparse_tensor(), base_dir);
    if (!dense.ok())
      return absl::Status(dense.status().code(),
                          absl::StrCat("sparse_value: ", dense.status().message()));
    return dense;
  }
  if (n == "value_string" || n == "value_strings")
    return Unsupported("string constants are not supported");
  return Invalid(absl::StrCat("unknown Constant attribute '", n, "'"));
}

absl::StatusOr<std::vector<int64_t>> NormAxes(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  std::vector<bool> seen(rank, false);
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int64_t n, NormAxis(a, rank));
    if (seen[n]) return Invalid(absl::StrCat("axis ", a, " is repeated"));
    seen[n] = true;
    out.push_back(n);
  }
  return out;
}

absl::StatusOr<std::optional<std::vector<int64_t>>> AxesArg(const OpContext& ctx, int input,
                                                            int since) {
  if (ctx.opset() >= since) {
    if (!ctx.Has(input)) return std::optional<std::vector<int64_t>>();
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.StaticInts(input));
    return std::optional<std::vector<int64_t>>(axes);
  }
  if (!ctx.HasAttr("axes")) return std::optional<std::vector<int64_t>>();
  return std::optional<std::vector<int64_t>>(ctx.Ints("axes"));
}

absl::StatusOr<Tensor> BroadcastTo(const Tensor& t, const Shape& shape) {
  ASSIGN_OR_RETURN(Shape out, BroadcastShapes(t.shape(), shape));
  if (out != shape)
    return Invalid(absl::StrCat("cannot broadcast (", absl::StrJoin(t.shape(), ","), ") to (",
                                absl::StrJoin(shape, ","), ")"));
  return t.Expand(shape);
}

}  // namespace kiln
