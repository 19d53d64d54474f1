// Builders of small ONNX models for the hostile model tables
// (hostile_models.cc, hostile_requests.cc): a Model under construction,
// attribute and tensor helpers, and the models several cases corrupt.
// Private to //tests/robustness:hostile_models.
#ifndef KILN_TESTS_ROBUSTNESS_HOSTILE_BUILDER_H_
#define KILN_TESTS_ROBUSTNESS_HOSTILE_BUILDER_H_

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"
#include "tests/robustness/hostile_models.h"

namespace kiln::hostile {

using onnx::TensorProto;

constexpr int64_t kBig = int64_t{1} << 62;  // 4.6e18
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

inline void SetValue(onnx::ValueInfoProto* v, const std::string& name, int elem,
              const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* shape = t->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = shape->add_dim();
    if (dims[i] < 0) d->set_dim_param(absl::StrCat(name, "_d", i));
    else d->set_dim_value(dims[i]);
  }
}

inline onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& in, const std::vector<std::string>& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out.empty() ? op : out[0] + "_" + op);
  for (const std::string& i : in) n->add_input(i);
  for (const std::string& o : out) n->add_output(o);
  return n;
}

inline void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline onnx::GraphProto* GraphAttr(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  return a->mutable_g();
}

inline HostTensor Ints(const std::vector<int64_t>& v, Shape shape) {
  return HostTensor::FromInt64s(v, std::move(shape));
}
inline HostTensor Vec(const std::vector<int64_t>& v) { return HostTensor::Vector(v); }
inline HostTensor Scalar(int64_t v) { return HostTensor::FromInt64s({v}, {}); }
inline HostTensor Floats(const std::vector<double>& v, Shape shape) {
  return HostTensor::FromDoubles(v, std::move(shape), dtypes::kFloat32);
}

// A small model under construction.
class Model {
 public:
  explicit Model(int64_t opset = 13) {
    p_.set_ir_version(8);
    p_.set_producer_name("kiln hostile_models");
    auto* o = p_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g()->set_name("hostile");
  }
  onnx::GraphProto* g() { return p_.mutable_graph(); }
  onnx::ModelProto& proto() { return p_; }
  Model& In(const std::string& name, int elem, const std::vector<int64_t>& dims) {
    SetValue(g()->add_input(), name, elem, dims);
    return *this;
  }
  Model& Out(const std::string& name, int elem, const std::vector<int64_t>& dims) {
    SetValue(g()->add_output(), name, elem, dims);
    return *this;
  }
  Model& Init(const std::string& name, const HostTensor& h) {
    HostTensorToProto(h, name, g()->add_initializer());
    return *this;
  }
  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& in,
                        const std::vector<std::string>& out) {
    return AddNode(g(), op, in, out);
  }
  std::string Bytes() const { return p_.SerializeAsString(); }

 private:
  onnx::ModelProto p_;
};

constexpr int kF = TensorProto::FLOAT;
constexpr int kI64 = TensorProto::INT64;

// X float[4] -> Relu -> Y: a valid model to corrupt.
inline Model ReluModel() {
  Model m;
  m.In("X", kF, {4}).Out("Y", kF, {4});
  m.Node("Relu", {"X"}, {"Y"});
  return m;
}

inline HostileCase LoadCase(const std::string& name, std::string model, const std::string& error) {
  HostileCase c;
  c.name = name;
  c.expect = HostileCase::Expect::kLoad;
  c.model = std::move(model);
  c.error = error;
  return c;
}

inline HostileCase RunCase(const std::string& name, Model m, const std::string& error,
                    std::vector<Feed> feeds = {}) {
  // kilnd serves only models with inputs: give input-less ones an unused X.
  if (m.g()->input_size() == 0) m.In("X", kF, {4});
  HostileCase c;
  c.name = name;
  c.expect = error.empty() ? HostileCase::Expect::kOk : HostileCase::Expect::kRun;
  c.model = m.Bytes();
  c.error = error;
  c.feeds = std::move(feeds);
  return c;
}

// Y = X + W with W an initializer of `dims` and raw bytes `raw` (or typed
// float_data when `typed` values are given).
inline std::string InitModel(const std::vector<int64_t>& dims, const std::string& raw,
                      const std::vector<float>* typed = nullptr) {
  Model m = ReluModel();
  TensorProto* t = m.g()->add_initializer();
  t->set_name("W");
  t->set_data_type(kF);
  for (int64_t d : dims) t->add_dims(d);
  if (typed) {
    for (float f : *typed) t->add_float_data(f);
  } else {
    t->set_raw_data(raw);
  }
  m.Node("Add", {"X", "W"}, {"Z"});
  m.Out("Z", kF, {4});
  return m.Bytes();
}

// Y = X + W with W float[4] in external data.
inline std::string ExternalModel(const std::string& location, const std::string& offset,
                          const std::string& length) {
  Model m = ReluModel();
  TensorProto* t = m.g()->add_initializer();
  t->set_name("W");
  t->set_data_type(kF);
  t->add_dims(4);
  t->set_data_location(TensorProto::EXTERNAL);
  auto kv = [&](const std::string& k, const std::string& v) {
    if (v.empty()) return;
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", location);
  kv("offset", offset);
  kv("length", length);
  m.Node("Add", {"X", "W"}, {"Z"});
  m.Out("Z", kF, {4});
  return m.Bytes();
}

// `depth` nested If nodes (cond from the outer initializer T); the innermost
// then-branch runs `inner_op` on `inner_in`.
inline std::string NestedIfModel(int depth, const std::string& inner_op,
                                 const std::string& inner_in) {
  Model m;
  m.In("X", kF, {4}).Out("Y", kF, {4});
  m.Init("T", HostTensor::FromInt64s({1}, {}, dtypes::kBool));
  onnx::GraphProto* g = m.g();
  std::string out = "Y";
  for (int d = 0; d < depth; ++d) {
    onnx::NodeProto* n = AddNode(g, "If", {"T"}, {out});
    onnx::GraphProto* then_g = GraphAttr(n, "then_branch");
    onnx::GraphProto* else_g = GraphAttr(n, "else_branch");
    then_g->set_name(absl::StrCat("then", d));
    else_g->set_name(absl::StrCat("else", d));
    std::string e = absl::StrCat("e", d);
    AddNode(else_g, "Identity", {"X"}, {e});
    SetValue(else_g->add_output(), e, kF, {4});
    out = absl::StrCat("t", d);
    SetValue(then_g->add_output(), out, kF, {4});
    g = then_g;
  }
  AddNode(g, inner_op, {inner_in}, {out});
  return m.Bytes();
}

// A file of `n` pseudo-random bytes.
inline std::string Garbage(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 12345;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

}  // namespace kiln::hostile

#endif  // KILN_TESTS_ROBUSTNESS_HOSTILE_BUILDER_H_
