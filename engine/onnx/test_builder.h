// Helpers of the ONNX importer's tests: small ModelProtos built in code,
// loaded and run on the test engine's CPU device.
#ifndef KILN_ENGINE_ONNX_TEST_BUILDER_H_
#define KILN_ENGINE_ONNX_TEST_BUILDER_H_

#include <memory>
#include <string>
#include <vector>

#include "engine/onnx/model.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"
#include "engine/tensor/test_util.h"

namespace kiln {
namespace onnx_test {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

// Builds small ModelProtos.
class Builder {
 public:
  explicit Builder(int64_t opset = 13) {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("g");
  }
  // dims: >= 0 fixed, -1 dynamic with a dim_param, -2 no value at all.
  Builder& Input(const std::string& name, int type, const std::vector<int64_t>& dims) {
    Info(m_.mutable_graph()->add_input(), name, type, dims);
    return *this;
  }
  Builder& Output(const std::string& name, int type = TensorProto::FLOAT) {
    auto* v = m_.mutable_graph()->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    return *this;
  }
  Builder& Init(const std::string& name, const HostTensor& h) {
    HostTensorToProto(h, name, m_.mutable_graph()->add_initializer());
    return *this;
  }
  NodeProto* Node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                  const std::string& name = "") {
    NodeProto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& s : in) n->add_input(s);
    for (auto& s : out) n->add_output(s);
    return n;
  }
  std::string Bytes() const { return m_.SerializeAsString(); }
  onnx::ModelProto& proto() { return m_; }

 private:
  static void Info(onnx::ValueInfoProto* v, const std::string& name, int type,
                   const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0) dim->set_dim_value(d);
      if (d == -1) dim->set_dim_param("N");
    }
  }
  onnx::ModelProto m_;
};

inline void AttrInt(NodeProto* n, const std::string& name, int64_t v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}
inline void AttrInts(NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void AttrFloat(NodeProto* n, const std::string& name, float v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::FLOAT);
  a->set_f(v);
}
inline void AttrTensor(NodeProto* n, const std::string& name, const HostTensor& h) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::TENSOR);
  HostTensorToProto(h, "", a->mutable_t());
}

inline std::unique_ptr<OnnxModel> Load(const Builder& b) {
  auto m = OnnxModel::LoadFromBytes(b.Bytes(), TestEngine(), "CPU");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

inline std::vector<double> RunOne(const OnnxModel& m, std::vector<Tensor> in, size_t out = 0) {
  auto r = m.Run(in);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || r->size() <= out) return {};
  return Values((*r)[out]);
}

inline Tensor F(const std::vector<float>& v, Shape s) {
  return Tensor::FromFloats(TestEngine(), v, s);
}

}  // namespace onnx_test
}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_TEST_BUILDER_H_
