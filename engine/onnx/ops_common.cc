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
    const onnx::SparseTensorProto& sp = a.sparse_tensor();
    ASSIGN_OR_RETURN(HostTensor values, HostTensorFromProto(sp.values(), base_dir));
    ASSIGN_OR_RETURN(HostTensor indices, HostTensorFromProto(sp.indices(), base_dir));
    Shape shape(sp.dims().begin(), sp.dims().end());
    // Built dense on the host: bounded like every host value.
    if (absl::StatusOr<int64_t> n = CheckedNumel(shape, kMaxHostElements, "its dense form");
        !n.ok())
      return absl::Status(n.status().code(), absl::StrCat("sparse_value: ", n.status().message()));
    HostTensor dense(values.dtype, shape);
    std::vector<int64_t> idx = indices.Int64s();
    int64_t nnz = values.numel(), rank = static_cast<int64_t>(shape.size());
    bool linear = indices.ndim() == 1;
    if (static_cast<int64_t>(idx.size()) != nnz * (linear ? 1 : rank))
      return Invalid("sparse_value: indices do not match the values");
    int item = values.dtype.ItemSize();
    for (int64_t k = 0; k < nnz; ++k) {
      int64_t flat = 0;
      for (int64_t d = 0; d < (linear ? 1 : rank); ++d) {
        if (linear) {
          flat = idx[k];
          break;
        }
        int64_t i = idx[k * rank + d];
        if (i < 0 || i >= shape[d]) return Invalid("sparse_value: index out of range");
        flat = flat * shape[d] + i;
      }
      if (flat < 0 || flat >= dense.numel()) return Invalid("sparse_value: index out of range");
      std::memcpy(dense.data.data() + flat * item, values.data.data() + k * item, item);
    }
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
