#include "tests/robustness/hostile_models.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln::hostile {
namespace {

using onnx::TensorProto;

constexpr int64_t kBig = int64_t{1} << 62;  // 4.6e18
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

void SetValue(onnx::ValueInfoProto* v, const std::string& name, int elem,
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

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& in, const std::vector<std::string>& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out.empty() ? op : out[0] + "_" + op);
  for (const std::string& i : in) n->add_input(i);
  for (const std::string& o : out) n->add_output(o);
  return n;
}

void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

onnx::GraphProto* GraphAttr(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  return a->mutable_g();
}

HostTensor Ints(const std::vector<int64_t>& v, Shape shape) {
  return HostTensor::FromInt64s(v, std::move(shape));
}
HostTensor Vec(const std::vector<int64_t>& v) { return HostTensor::Vector(v); }
HostTensor Scalar(int64_t v) { return HostTensor::FromInt64s({v}, {}); }
HostTensor Floats(const std::vector<double>& v, Shape shape) {
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
Model ReluModel() {
  Model m;
  m.In("X", kF, {4}).Out("Y", kF, {4});
  m.Node("Relu", {"X"}, {"Y"});
  return m;
}

HostileCase LoadCase(const std::string& name, std::string model, const std::string& error) {
  HostileCase c;
  c.name = name;
  c.expect = HostileCase::Expect::kLoad;
  c.model = std::move(model);
  c.error = error;
  return c;
}

HostileCase RunCase(const std::string& name, Model m, const std::string& error,
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
std::string InitModel(const std::vector<int64_t>& dims, const std::string& raw,
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
std::string ExternalModel(const std::string& location, const std::string& offset,
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
std::string NestedIfModel(int depth, const std::string& inner_op, const std::string& inner_in) {
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
std::string Garbage(size_t n) {
  std::string s(n, '\0');
  uint32_t x = 12345;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

}  // namespace

std::vector<HostileCase> LoadCases() {
  std::vector<HostileCase> out;
  {  // A model whose 1 KiB initializer is cut off in the middle.
    Model m = ReluModel();
    m.Init("W", Floats(std::vector<double>(256, 1.0), {256}));
    std::string bytes = m.Bytes();
    out.push_back(LoadCase("truncated", bytes.substr(0, bytes.size() / 2),
                           "not a valid ONNX model"));
  }
  out.push_back(LoadCase("garbage", Garbage(4096), "not a valid ONNX model"));
  out.push_back(LoadCase("empty", "", "no graph"));
  out.push_back(LoadCase("init_huge_dims", InitModel({kBig, 4}, std::string(16, '\0')),
                         "too large"));
  out.push_back(LoadCase("init_negative_dim", InitModel({-1, 4}, std::string(16, '\0')),
                         "negative dimension"));
  out.push_back(LoadCase("init_overflow_dims",
                         InitModel({int64_t{1} << 32, int64_t{1} << 32, int64_t{1} << 32},
                                   std::string(16, '\0')),
                         "too large"));
  out.push_back(LoadCase("init_size_mismatch", InitModel({4}, std::string(12, '\0')),
                         "raw_data has 12 bytes"));
  {
    std::vector<float> three = {1, 2, 3};
    out.push_back(LoadCase("init_typed_mismatch", InitModel({4}, "", &three),
                           "float_data has 3 values"));
  }
  {  // A Constant node with absurd dims (decoded at load).
    Model m = ReluModel();
    onnx::NodeProto* n = m.Node("Constant", {}, {"C"});
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(kF);
    a->mutable_t()->add_dims(kBig);
    a->mutable_t()->add_dims(kBig);
    out.push_back(LoadCase("constant_huge_dims", m.Bytes(), "too large"));
  }
  {  // A sparse initializer whose dense shape overflows.
    Model m = ReluModel();
    onnx::SparseTensorProto* sp = m.g()->add_sparse_initializer();
    sp->add_dims(kBig);
    sp->add_dims(kBig);
    HostTensorToProto(Floats({1}, {1}), "S", sp->mutable_values());
    HostTensorToProto(Vec({0}), "", sp->mutable_indices());
    out.push_back(LoadCase("sparse_huge", m.Bytes(), "huge"));
  }
  // External data.
  const std::string sixteen(16, '\x01');
  {
    HostileCase c = LoadCase("ext_parent", ExternalModel("../outside.bin", "", ""),
                             "leaves the model directory");
    out.push_back(c);
  }
  out.push_back(LoadCase("ext_absolute", ExternalModel("/etc/hostname", "", ""),
                         "must be relative"));
  {
    HostileCase c = LoadCase("ext_past_end", ExternalModel("w.bin", "8", "16"), "outside");
    c.files["w.bin"] = sixteen;
    out.push_back(c);
  }
  {
    HostileCase c = LoadCase("ext_length_overflow",
                             ExternalModel("w.bin", "1", absl::StrCat(kMax)), "outside");
    c.files["w.bin"] = sixteen;
    out.push_back(c);
  }
  {
    HostileCase c = LoadCase("ext_offset_huge", ExternalModel("w.bin", absl::StrCat(kBig), "16"),
                             "outside");
    c.files["w.bin"] = sixteen;
    out.push_back(c);
  }
  {
    HostileCase c = LoadCase("ext_fifo", ExternalModel("w.bin", "", ""), "not a regular file");
    c.fifos_links["w.bin"] = "fifo";
    out.push_back(c);
  }
  {
    HostileCase c = LoadCase("ext_dev_zero", ExternalModel("w.bin", "", ""),
                             "not a regular file");
    c.fifos_links["w.bin"] = "/dev/zero";
    out.push_back(c);
  }
  {
    HostileCase c = LoadCase("model_fifo", "", "not a regular file");
    c.file = HostileCase::File::kFifo;
    out.push_back(c);
  }
  {
    HostileCase c = LoadCase("model_dev_zero", "", "not a regular file");
    c.file = HostileCase::File::kDevZero;
    out.push_back(c);
  }
  // Graph structure.
  {
    Model m;
    m.In("X", kF, {4}).Out("A", kF, {4});
    m.Node("Add", {"X", "B"}, {"A"});
    m.Node("Relu", {"A"}, {"B"});
    out.push_back(LoadCase("cycle", m.Bytes(), "cycle"));
  }
  {
    Model m;
    m.In("X", kF, {4}).Out("A", kF, {4});
    m.Node("Add", {"X", "A"}, {"A"});
    out.push_back(LoadCase("self_loop", m.Bytes(), "cycle"));
  }
  {
    Model m;
    m.In("X", kF, {4}).Out("Y", kF, {4});
    m.Node("FooBar", {"X"}, {"Y"});
    out.push_back(LoadCase("unknown_op", m.Bytes(), "unsupported operator"));
  }
  {
    Model m;
    auto* o = m.proto().add_opset_import();
    o->set_domain("com.evil");
    o->set_version(1);
    m.In("X", kF, {4}).Out("Y", kF, {4});
    m.Node("Foo", {"X"}, {"Y"})->set_domain("com.evil");
    out.push_back(LoadCase("unknown_domain", m.Bytes(), "domain 'com.evil'"));
  }
  {
    Model m;
    m.In("X", kF, {4}).Out("Y", kF, {4});
    m.Node("Relu", {"X"}, {"Y"})->set_domain("com.unimported");
    out.push_back(LoadCase("unimported_domain", m.Bytes(), "com.unimported"));
  }
  {
    Model m;
    m.In("X", kF, {4}).Out("Y", kF, {4});
    m.Node("Add", {"X", "nope"}, {"Y"});
    out.push_back(LoadCase("undefined_input", m.Bytes(), "'nope' is not defined"));
  }
  {
    Model m;
    m.In("X", kF, {4}).Out("Y", kF, {4}).Out("Z", kF, {4});
    m.Node("Relu", {"X"}, {"Y"});
    out.push_back(LoadCase("undefined_output", m.Bytes(), "'Z' is never produced"));
  }
  {
    Model m;
    m.In("X", TensorProto::UNDEFINED, {4}).Out("Y", kF, {4});
    m.Node("Relu", {"X"}, {"Y"});
    out.push_back(LoadCase("input_undefined_type", m.Bytes(), "UNDEFINED"));
  }
  {
    Model m;
    m.In("X", TensorProto::STRING, {4}).Out("Y", kF, {4});
    m.Node("Identity", {"X"}, {"Y"});
    out.push_back(LoadCase("input_string_type", m.Bytes(), "STRING"));
  }
  {
    Model m;
    m.g()->add_input()->set_name("X");  // no type at all
    m.Out("Y", kF, {4});
    m.Node("Relu", {"X"}, {"Y"});
    out.push_back(LoadCase("input_no_type", m.Bytes(), "no type"));
  }
  {
    Model m;
    m.In("X", kF, {4}).Out("Y", kF, {4});
    m.Node("Relu", {"X"}, {"Y"});
    m.Node("Neg", {"X"}, {"Y"});
    out.push_back(LoadCase("duplicate_output", m.Bytes(), "more than once"));
  }
  out.push_back(LoadCase("nested_unknown_op", NestedIfModel(8, "FooBar", "X"),
                         "unsupported operator"));
  out.push_back(LoadCase("nested_undefined", NestedIfModel(8, "Relu", "nope"),
                         "'nope' is not defined"));
  out.push_back(LoadCase("nested_too_deep", NestedIfModel(200, "Relu", "X"),
                         "not a valid ONNX model"));
  {  // A model-local function that calls itself.
    Model m;
    auto* o = m.proto().add_opset_import();
    o->set_domain("local");
    o->set_version(1);
    onnx::FunctionProto* f = m.proto().add_functions();
    f->set_name("Rec");
    f->set_domain("local");
    f->add_input("a");
    f->add_output("b");
    auto* fo = f->add_opset_import();
    fo->set_domain("local");
    fo->set_version(1);
    onnx::NodeProto* call = f->add_node();
    call->set_op_type("Rec");
    call->set_domain("local");
    call->add_input("a");
    call->add_output("b");
    m.In("X", kF, {4}).Out("Y", kF, {4});
    m.Node("Rec", {"X"}, {"Y"})->set_domain("local");
    out.push_back(LoadCase("function_recursion", m.Bytes(), "calls itself"));
  }
  return out;
}

std::vector<HostileCase> RunCases() {
  std::vector<HostileCase> out;
  // ConstantOfShape with initializer shapes.
  auto cos = [](const std::vector<int64_t>& shape) {
    Model m;
    m.Init("S", Vec(shape)).Out("Y", kF, {-1, -1});
    m.Node("ConstantOfShape", {"S"}, {"Y"});
    return m;
  };
  out.push_back(RunCase("cos_init_overflow", cos({kBig, 4}), "too large"));
  out.push_back(RunCase("cos_init_big", cos({1000000, 1000000}), "memory"));
  out.push_back(RunCase("cos_init_negative", cos({-1, 4}), "negative"));
  {
    Model m;  // an empty tensor reshaped to (2^62, 2^62, 0): no elements, absurd strides
    m.In("X", kF, {4}).Init("Z", Vec({0})).Init("S", Vec({kBig, kBig, 0}));
    m.Out("Y", kF, {-1, -1, -1});
    m.Node("Slice", {"X", "Z", "Z"}, {"E"});
    IntAttr(m.Node("Reshape", {"E", "S"}, {"Y"}), "allowzero", 1);
    out.push_back(RunCase("reshape_init_overflow", m, "too large"));
  }
  auto unary_shape = [](const std::string& op, const std::vector<int64_t>& x_dims,
                        const std::vector<int64_t>& arg, int rank) {
    Model m;
    m.In("X", kF, x_dims).Init("S", Vec(arg)).Out("Y", kF, std::vector<int64_t>(rank, -1));
    m.Node(op, {"X", "S"}, {"Y"});
    return m;
  };
  out.push_back(RunCase("expand_init_overflow", unary_shape("Expand", {1}, {kBig, 4}, 2),
                        "too large"));
  out.push_back(RunCase("expand_init_negative", unary_shape("Expand", {1}, {-5, 4}, 2),
                        "negative"));
  out.push_back(RunCase("tile_init_overflow", unary_shape("Tile", {4}, {kBig}, 1), "too large"));
  out.push_back(RunCase("pad_init_overflow", unary_shape("Pad", {4}, {kBig, kBig}, 1),
                        "too large"));
  out.push_back(RunCase("pad_init_min", unary_shape("Pad", {4}, {kMin, 0}, 1), "pad"));
  {
    Model m;
    m.Init("A", Scalar(kMin)).Init("B", Scalar(kMax)).Init("D", Scalar(1)).Out("Y", kI64, {-1});
    m.Node("Range", {"A", "B", "D"}, {"Y"});
    out.push_back(RunCase("range_init_overflow", m, "too large"));
  }
  {
    Model m;
    m.Init("A", Floats({0}, {})).Init("B", Floats({INFINITY}, {})).Init("D", Floats({1}, {}));
    m.Out("Y", kF, {-1});
    m.Node("Range", {"A", "B", "D"}, {"Y"});
    out.push_back(RunCase("range_init_infinite", m, "too large"));
  }
  auto resize = [](const HostTensor* scales, const HostTensor* sizes) {
    Model m;
    m.In("X", kF, {1, 1, 2, 2}).Out("Y", kF, {-1, -1, -1, -1});
    std::vector<std::string> in = {"X", ""};
    if (scales) {
      m.Init("SC", *scales);
      in.push_back("SC");
    } else {
      in.push_back("");
    }
    if (sizes) {
      m.Init("SZ", *sizes);
      in.push_back("SZ");
    }
    m.Node("Resize", in, {"Y"});
    return m;
  };
  HostTensor huge_sizes = Vec({1, 1, int64_t{1} << 31, int64_t{1} << 31});
  HostTensor inf_scales = Floats({1, 1, INFINITY, INFINITY}, {4});
  out.push_back(RunCase("resize_init_huge", resize(nullptr, &huge_sizes), "too large"));
  out.push_back(RunCase("resize_init_inf_scale", resize(&inf_scales, nullptr), "scales"));
  {  // Valid but nasty: a host-folded Slice with step INT64_MAX.
    Model m;
    m.Init("D", Vec({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}))
        .Init("St", Vec({1}))
        .Init("En", Vec({16}))
        .Init("Ax", Vec({0}))
        .Init("Sp", Vec({kMax}))
        .Out("Y", kI64, {-1});
    m.Node("Slice", {"D", "St", "En", "Ax", "Sp"}, {"Y"});
    out.push_back(RunCase("slice_fold_step_max", m, ""));
  }
  {  // Valid but nasty: a device Slice with step INT64_MIN.
    Model m;
    m.In("X", kF, {4})
        .Init("St", Vec({3}))
        .Init("En", Vec({kMin}))
        .Init("Ax", Vec({0}))
        .Init("Sp", Vec({kMin}))
        .Out("Y", kF, {-1});
    m.Node("Slice", {"X", "St", "En", "Ax", "Sp"}, {"Y"});
    out.push_back(RunCase("slice_step_min", m, ""));
  }
  {
    Model m;
    m.Init("D", Floats({}, {2, 0})).Init("I", Ints({0, 0}, {1, 2})).Out("Y", kF, {-1});
    m.Node("GatherND", {"D", "I"}, {"Y"});
    out.push_back(RunCase("gathernd_empty_dim", m, "empty"));
  }
  {
    Model m;
    m.Init("D", Floats({}, {2, 0})).Init("I", Ints({0, 0}, {1, 2})).Init("U", Floats({1}, {1}));
    m.Out("Y", kF, {2, 0});
    m.Node("ScatterND", {"D", "I", "U"}, {"Y"});
    out.push_back(RunCase("scatternd_empty_dim", m, "empty"));
  }
  {  // Loop(100000) { Loop(100000) { Identity } }: 10^10 node runs.
    Model m;
    m.In("X", kF, {4}).Out("Y", kF, {4});
    m.Init("M", Scalar(100000)).Init("T", HostTensor::FromInt64s({1}, {}, dtypes::kBool));
    onnx::NodeProto* outer = m.Node("Loop", {"M", "T", "X"}, {"Y"});
    onnx::GraphProto* body = GraphAttr(outer, "body");
    body->set_name("outer_body");
    SetValue(body->add_input(), "i", kI64, {});
    SetValue(body->add_input(), "c", TensorProto::BOOL, {});
    SetValue(body->add_input(), "v", kF, {4});
    onnx::NodeProto* inner = AddNode(body, "Loop", {"M", "T", "v"}, {"v2"});
    AddNode(body, "Identity", {"c"}, {"c2"});
    SetValue(body->add_output(), "c2", TensorProto::BOOL, {});
    SetValue(body->add_output(), "v2", kF, {4});
    onnx::GraphProto* ib = GraphAttr(inner, "body");
    ib->set_name("inner_body");
    SetValue(ib->add_input(), "j", kI64, {});
    SetValue(ib->add_input(), "ci", TensorProto::BOOL, {});
    SetValue(ib->add_input(), "w", kF, {4});
    AddNode(ib, "Identity", {"ci"}, {"co"});
    AddNode(ib, "Identity", {"w"}, {"wo"});
    SetValue(ib->add_output(), "co", TensorProto::BOOL, {});
    SetValue(ib->add_output(), "wo", kF, {4});
    out.push_back(RunCase("loop_bomb", m, "too many"));
  }
  {  // SplitToSequence of a (lazy) 2^30-element tensor into 2^30 pieces.
    Model m;
    m.In("X", kF, {1}).Init("S", Vec({int64_t{1} << 30})).Out("N", kI64, {});
    m.Node("Expand", {"X", "S"}, {"E"});
    m.Node("SplitToSequence", {"E"}, {"Q"});
    m.Node("SequenceLength", {"Q"}, {"N"});
    out.push_back(RunCase("split_sequence_bomb", m, "too many"));
  }
  {  // RoiAlign whose output size overflows int64.
    Model m(16);
    m.Init("D", Floats({1, 2, 3, 4}, {1, 1, 2, 2}))
        .Init("R", Floats({0, 0, 1, 1}, {1, 4}))
        .Init("B", Vec({0}))
        .Out("Y", kF, {-1, -1, -1, -1});
    onnx::NodeProto* n = m.Node("RoiAlign", {"D", "R", "B"}, {"Y"});
    IntAttr(n, "output_height", int64_t{1} << 32);
    IntAttr(n, "output_width", int64_t{1} << 32);
    out.push_back(RunCase("roialign_overflow", m, "too large"));
  }
  {  // MaxRoiPool likewise.
    Model m;
    m.Init("D", Floats({1, 2, 3, 4}, {1, 1, 2, 2}))
        .Init("R", Floats({0, 0, 0, 1, 1}, {1, 5}))
        .Out("Y", kF, {-1, -1, -1, -1});
    onnx::NodeProto* n = m.Node("MaxRoiPool", {"D", "R"}, {"Y"});
    IntsAttr(n, "pooled_shape", {int64_t{1} << 32, int64_t{1} << 32});
    out.push_back(RunCase("maxroipool_overflow", m, "too large"));
  }
  {  // A DFT whose cos / sin tables would be 10^10 entries.
    Model m(17);
    m.In("X", kF, {1, 4, 1}).Init("L", Scalar(100000)).Out("Y", kF, {-1, -1, -1});
    m.Node("DFT", {"X", "L"}, {"Y"});
    out.push_back(RunCase("dft_huge", m, "too large"));
  }
  {  // Conv with zero strides.
    Model m;
    m.In("X", kF, {1, 1, 4, 4}).Init("W", Floats({1, 1, 1, 1}, {1, 1, 2, 2}));
    m.Out("Y", kF, {-1, -1, -1, -1});
    IntsAttr(m.Node("Conv", {"X", "W"}, {"Y"}), "strides", {0, 0});
    out.push_back(RunCase("conv_zero_stride", m, "stride"));
  }
  {  // MaxPool with an absurd kernel and pads.
    Model m;
    m.In("X", kF, {1, 1, 4, 4}).Out("Y", kF, {-1, -1, -1, -1});
    onnx::NodeProto* n = m.Node("MaxPool", {"X"}, {"Y"});
    IntsAttr(n, "kernel_shape", {kBig, kBig});
    IntsAttr(n, "pads", {kBig, kBig, kBig, kBig});
    out.push_back(RunCase("maxpool_huge", m, "too large"));
  }
  {  // RandomNormal with an overflowing shape attribute.
    Model m;
    m.Out("Y", kF, {-1, -1});
    IntsAttr(m.Node("RandomNormal", {}, {"Y"}), "shape", {kBig, 8});
    out.push_back(RunCase("random_shape_overflow", m, "too large"));
  }
  return out;
}

std::vector<RequestModel> RequestModels() {
  std::vector<RequestModel> out;
  auto s2 = [](int64_t a, int64_t b) { return std::vector<Feed>{{"S", Vec({a, b})}}; };
  {
    Model m;
    m.In("S", kI64, {2}).Out("Y", kF, {-1, -1});
    m.Node("ConstantOfShape", {"S"}, {"Y"});
    RequestModel r{"req_cos", m.Bytes(), s2(2, 3), {}};
    r.bad = {{"[1e6,1e6]", s2(1000000, 1000000), "memory"},
             {"[2^62,4]", s2(kBig, 4), "too large"},
             {"[2^32,2^32]", s2(int64_t{1} << 32, int64_t{1} << 32), "too large"},
             {"[-1,4]", s2(-1, 4), "negative"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("X", kF, {4}).In("S", kI64, {2}).Out("Y", kF, {-1, -1});
    m.Node("Reshape", {"X", "S"}, {"Y"});
    std::vector<Feed> good = s2(2, 2);
    good.insert(good.begin(), Feed{"X", Floats({1, 2, 3, 4}, {4})});
    RequestModel r{"req_reshape", m.Bytes(), good, {}};
    auto bad = [&](int64_t a, int64_t b) {
      std::vector<Feed> f = s2(a, b);
      f.insert(f.begin(), Feed{"X", Floats({1, 2, 3, 4}, {4})});
      return f;
    };
    r.bad = {{"[2^62,4]", bad(kBig, 4), "reshape"},
             {"[2^32,2^32]", bad(int64_t{1} << 32, int64_t{1} << 32), "reshape"},
             {"[-3,4]", bad(-3, 4), "negative"}};
    out.push_back(r);
  }
  auto with_x = [](Feed x, std::vector<Feed> f) {
    f.insert(f.begin(), std::move(x));
    return f;
  };
  {
    Model m;
    m.In("X", kF, {1}).In("S", kI64, {2}).Out("Y", kF, {-1, -1});
    m.Node("Expand", {"X", "S"}, {"Y"});
    Feed x{"X", Floats({7}, {1})};
    RequestModel r{"req_expand", m.Bytes(), with_x(x, s2(2, 3)), {}};
    r.bad = {{"[1e6,1e6]", with_x(x, s2(1000000, 1000000)), "memory"},
             {"[2^62,4]", with_x(x, s2(kBig, 4)), "too large"},
             {"[-5,4]", with_x(x, s2(-5, 4)), "negative"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("X", kF, {2, 2}).In("S", kI64, {2}).Out("Y", kF, {-1, -1});
    m.Node("Tile", {"X", "S"}, {"Y"});
    Feed x{"X", Floats({1, 2, 3, 4}, {2, 2})};
    RequestModel r{"req_tile", m.Bytes(), with_x(x, s2(2, 1)), {}};
    r.bad = {{"[1e6,1e6]", with_x(x, s2(1000000, 1000000)), "memory"},
             {"[2^62,4]", with_x(x, s2(kBig, 4)), "too large"},
             {"[-1,1]", with_x(x, s2(-1, 1)), "negative"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("A", kI64, {}).In("B", kI64, {}).In("D", kI64, {}).Out("Y", kI64, {-1});
    m.Node("Range", {"A", "B", "D"}, {"Y"});
    auto abd = [](int64_t a, int64_t b, int64_t d) {
      return std::vector<Feed>{{"A", Scalar(a)}, {"B", Scalar(b)}, {"D", Scalar(d)}};
    };
    RequestModel r{"req_range", m.Bytes(), abd(0, 5, 1), {}};
    r.bad = {{"(0,2^62,1)", abd(0, kBig, 1), "too large"},
             {"(min,max,1)", abd(kMin, kMax, 1), "too large"},
             {"(max,min,-1)", abd(kMax, kMin, -1), "too large"},
             {"(0,5,0)", abd(0, 5, 0), "delta"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("X", kF, {2, 2}).In("P", kI64, {4}).Out("Y", kF, {-1, -1});
    m.Node("Pad", {"X", "P"}, {"Y"});
    Feed x{"X", Floats({1, 2, 3, 4}, {2, 2})};
    auto p = [&](int64_t a, int64_t b, int64_t c, int64_t d) {
      return with_x(x, {{"P", Vec({a, b, c, d})}});
    };
    RequestModel r{"req_pad", m.Bytes(), p(1, 1, 1, 1), {}};
    r.bad = {{"[1e6,...]", p(1000000, 1000000, 1000000, 1000000), "memory"},
             {"[2^62,0,0,0]", p(kBig, 0, 0, 0), "too large"},
             {"[2^62,2^62,2^62,2^62]", p(kBig, kBig, kBig, kBig), "too large"},
             {"[min,0,0,0]", p(kMin, 0, 0, 0), "pad"}};
    out.push_back(r);
  }
  {
    Model m;
    m.In("X", kF, {1, 1, 2, 2}).In("Z", kI64, {4}).Out("Y", kF, {-1, -1, -1, -1});
    m.Node("Resize", {"X", "", "", "Z"}, {"Y"});
    Feed x{"X", Floats({1, 2, 3, 4}, {1, 1, 2, 2})};
    auto z = [&](int64_t a, int64_t b) { return with_x(x, {{"Z", Vec({1, 1, a, b})}}); };
    RequestModel r{"req_resize", m.Bytes(), z(4, 4), {}};
    r.bad = {{"[1,1,2^31,2^31]", z(int64_t{1} << 31, int64_t{1} << 31), "too large"},
             {"[1,1,2^62,2^62]", z(kBig, kBig), "too large"},
             {"[1,1,1e6,1e6]", z(1000000, 1000000), "memory"},
             {"[1,1,-4,4]", z(-4, 4), "output size"}};
    out.push_back(r);
  }
  return out;
}

std::string DynamicReluModel() {
  Model m;
  m.In("X", kF, {-1}).Out("Y", kF, {-1});
  m.Node("Relu", {"X"}, {"Y"});
  return m.Bytes();
}

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return absl::InternalError("cannot write " + path);
  return absl::OkStatus();
}

absl::Status MakeSpecialFile(const std::string& path, const std::string& what) {
  ::unlink(path.c_str());
  int r = what == "fifo" ? ::mkfifo(path.c_str(), 0644) : ::symlink(what.c_str(), path.c_str());
  if (r != 0)
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::Status WriteCase(const HostileCase& c, const std::string& dir) {
  ::mkdir(dir.c_str(), 0755);
  std::string model = dir + "/model.onnx";
  switch (c.file) {
    case HostileCase::File::kBytes: {
      absl::Status s = WriteFile(model, c.model);
      if (!s.ok()) return s;
      break;
    }
    case HostileCase::File::kFifo: {
      absl::Status s = MakeSpecialFile(model, "fifo");
      if (!s.ok()) return s;
      break;
    }
    case HostileCase::File::kDevZero: {
      absl::Status s = MakeSpecialFile(model, "/dev/zero");
      if (!s.ok()) return s;
      break;
    }
  }
  for (const auto& [name, bytes] : c.files) {
    absl::Status s = WriteFile(dir + "/" + name, bytes);
    if (!s.ok()) return s;
  }
  for (const auto& [name, what] : c.fifos_links) {
    absl::Status s = MakeSpecialFile(dir + "/" + name, what);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string DatatypeOf(DType t) {
  switch (t.scalar) {
    case ScalarType::kBool: return "BOOL";
    case ScalarType::kInt8: return "INT8";
    case ScalarType::kInt16: return "INT16";
    case ScalarType::kInt32: return "INT32";
    case ScalarType::kInt64: return "INT64";
    case ScalarType::kUInt8: return "UINT8";
    case ScalarType::kUInt16: return "UINT16";
    case ScalarType::kUInt32: return "UINT32";
    case ScalarType::kUInt64: return "UINT64";
    case ScalarType::kFloat16: return "FP16";
    case ScalarType::kBFloat16: return "BF16";
    case ScalarType::kFloat32: return "FP32";
    case ScalarType::kFloat64: return "FP64";
    default: return "INVALID";
  }
}

}  // namespace kiln::hostile
