#include "engine/onnx/model.h"

#include <cstdio>
#include <fstream>

#include "engine/onnx/test_builder.h"

namespace kiln {
namespace {

using namespace onnx_test;  // NOLINT: the test helpers

TEST(OnnxModelTest, DynamicDimsAndConstantWeights) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, 2}).Output("y");
  AttrTensor(b.Node("Constant", {}, {"w"}),
             "value", HostTensor::FromDoubles({1, 2, 3, 4}, {2, 2}, dtypes::kFloat32));
  NodeProto* c = b.Node("Constant", {}, {"bias"});
  AttributeProto* a = c->add_attribute();
  a->set_name("value_floats");
  a->set_type(AttributeProto::FLOATS);
  a->add_floats(10);
  a->add_floats(20);
  b.Node("MatMul", {"x", "w"}, {"xw"});
  b.Node("Add", {"xw", "bias"}, {"y"});
  auto m = Load(b);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->inputs().size(), 1u);
  EXPECT_EQ(m->inputs()[0].dims, (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(m->inputs()[0].dim_params[0], "N");
  EXPECT_EQ(m->inputs()[0].dtype, dtypes::kFloat32);
  // Batch 1 and batch 3 through the same model.
  ExpectNear(RunOne(*m, {F({1, 1}, {1, 2})}), {14, 26});
  ExpectNear(RunOne(*m, {F({1, 0, 0, 1, 2, 2}, {3, 2})}), {11, 22, 13, 24, 18, 32});
  // Wrong dtype / shape.
  auto bad = m->Run({F({1, 2, 3}, {1, 3})});
  EXPECT_NE(bad.status().message().find("input 'x' must have shape (?,2), got (1,3)"),
            std::string::npos)
      << bad.status();
  auto bad_type = m->Run({Tensor::FromVector<int32_t>(TestEngine(), {1, 2}, {1, 2}, dtypes::kInt32)});
  EXPECT_NE(bad_type.status().message().find("must be float32, got int32"), std::string::npos);
  EXPECT_FALSE(m->Run({}).ok());
}

// A declared scalar accepts shape [1] (as onnxruntime does), not [2] or [1,1].
// Gemm(transB = 1) of an initializer weight with K >= 4096: uploaded
// transposed at load (prepack.h) with the same results, from raw_data,
// float_data or an external file; a weight also read by another node, or
// with a short K, is left as it is.
TEST(OnnxModelTest, GemmWeightsArePrepackedAtLoad) {
  const int kK = 4096;  // the shortest K that is repacked
  std::vector<double> w(3 * kK);  // (N 3, K)
  std::vector<float> x(2 * kK);   // (2, K)
  for (int i = 0; i < 3 * kK; ++i) w[i] = (i * 7 % 13) / 4.0 - 1.5;
  for (int i = 0; i < 2 * kK; ++i) x[i] = static_cast<float>((i * 5 % 11) / 4.0 - 1.25);
  std::vector<double> want;  // x . w^T + bias
  for (int i = 0; i < 2; ++i)
    for (int n = 0; n < 3; ++n) {
      double acc = 10 * (n + 1);
      for (int k = 0; k < kK; ++k) acc += x[i * kK + k] * w[n * kK + k];
      want.push_back(acc);
    }
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream f(dir + "/prepack_w.bin", std::ios::binary);
    for (double v : w) {
      float fv = static_cast<float>(v);
      f.write(reinterpret_cast<const char*>(&fv), sizeof(fv));
    }
  }
  enum { kRaw, kShared, kFloatData, kExternal };
  for (int variant : {kRaw, kShared, kFloatData, kExternal}) {
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2, kK}).Output("y");
    b.Init("w", HostTensor::FromDoubles(w, {3, kK}, dtypes::kFloat32));
    b.Init("bias", HostTensor::FromDoubles({10, 20, 30}, {3}, dtypes::kFloat32));
    TensorProto* t = b.proto().mutable_graph()->mutable_initializer(0);
    if (variant == kFloatData || variant == kExternal) t->clear_raw_data();
    if (variant == kFloatData)
      for (double v : w) t->add_float_data(static_cast<float>(v));
    if (variant == kExternal) {
      t->set_data_location(TensorProto::EXTERNAL);
      auto* loc = t->add_external_data();
      loc->set_key("location");
      loc->set_value("prepack_w.bin");
    }
    AttrInt(b.Node("Gemm", {"x", "w", "bias"}, {variant == kShared ? "g" : "y"}), "transB", 1);
    if (variant == kShared) {
      b.Output("w_sum");
      b.Node("Identity", {"g"}, {"y"});
      b.Node("ReduceSum", {"w"}, {"w_sum"});
    }
    auto m = OnnxModel::LoadFromBytes(b.Bytes(), TestEngine(), "CPU", dir);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ((*m)->prepacked(), variant == kShared ? 0 : 1) << variant;
    ExpectNear(RunOne(**m, {F(x, {2, kK})}), want);
  }
  // A short K (a classifier's matrix-vector product) keeps its layout.
  Builder b;
  b.Input("x", TensorProto::FLOAT, {1, 4}).Output("y");
  b.Init("w", HostTensor::FromDoubles({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, dtypes::kFloat32));
  AttrInt(b.Node("Gemm", {"x", "w"}, {"y"}), "transB", 1);
  auto m = Load(b);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->prepacked(), 0);
  ExpectNear(RunOne(*m, {F({1, 0, 2, 1}, {1, 4})}), {11, 27});
  std::remove((dir + "/prepack_w.bin").c_str());
}

TEST(OnnxModelTest, ScalarInputsMayComeAsShapeOne) {
  Builder b;
  b.Input("s", TensorProto::FLOAT, {}).Input("x", TensorProto::FLOAT, {2}).Output("y");
  b.Node("Mul", {"x", "s"}, {"y"});
  auto m = Load(b);
  ASSERT_TRUE(m);
  ExpectNear(RunOne(*m, {F({3}, {}), F({1, 2}, {2})}), {3, 6});
  auto r = m->Run({F({3}, {1}), F({1, 2}, {2})});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)[0].shape() == Shape({2}));
  ExpectNear(Values((*r)[0]), {3, 6});
  EXPECT_FALSE(m->Run({F({3, 3}, {2}), F({1, 2}, {2})}).ok());
  EXPECT_FALSE(m->Run({F({3}, {1, 1}), F({1, 2}, {2})}).ok());
}

TEST(OnnxModelTest, ShapeArithmeticFoldsWithoutKernels) {
  // y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])): flatten all but dim 0.
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, 2, 3}).Output("y");
  b.Init("idx", HostTensor::FromInt64s({0}, {}));
  b.Init("minus1", HostTensor::Vector({-1}));
  b.Node("Shape", {"x"}, {"s"});
  b.Node("Gather", {"s", "idx"}, {"n"});
  AttrInts(b.Node("Unsqueeze", {"n"}, {"n1"}), "axes", {0});
  b.proto().mutable_opset_import(0)->set_version(11);  // Unsqueeze with the axes attribute
  NodeProto* cat = b.Node("Concat", {"n1", "minus1"}, {"target"});
  AttrInt(cat, "axis", 0);
  b.Node("Cast", {"target"}, {"target64"})->add_attribute()->CopyFrom([] {
    AttributeProto a;
    a.set_name("to");
    a.set_type(AttributeProto::INT);
    a.set_i(TensorProto::INT64);
    return a;
  }());
  b.Node("Reshape", {"x", "target64"}, {"y"});
  auto m = Load(b);
  ASSERT_TRUE(m);
  Tensor x = F({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 2, 3});
  uint64_t before = TestEngine()->stats().kernels_run;
  auto out = m->Run({x});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TestEngine()->stats().kernels_run, before) << "graph building ran kernels";
  EXPECT_EQ((*out)[0].shape(), (Shape{2, 6}));
}

// Gather with constant indices that pick consecutive entries (q, k, v =
// qkv[0], qkv[1], qkv[2]) is a view of its input, not an indexed load;
// other constant indices keep the indexed load; an index out of range is an
// error when the model is run, not a crash.
TEST(OnnxModelTest, GatherOfAConstantRunIsAView) {
  struct Case {
    HostTensor idx;
    int64_t axis;
    Shape out;
    std::vector<double> want;
    bool view;
  } cases[] = {
      {HostTensor::FromInt64s({1}, {}), 0, {2, 2}, {4, 5, 6, 7}, true},
      {HostTensor::FromInt64s({-2, -1}, {2}), 2, {3, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
       true},
      {HostTensor::FromInt64s({1, 0}, {2}), 2, {3, 2, 2}, {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10},
       false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.axis);
    Builder b;
    b.Input("x", TensorProto::FLOAT, {3, 2, 2}).Output("y");
    b.Init("idx", c.idx);
    AttrInt(b.Node("Gather", {"x", "idx"}, {"y"}), "axis", c.axis);
    auto m = Load(b);
    ASSERT_TRUE(m);
    auto out = m->Run({F({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 2, 2})});
    ASSERT_TRUE(out.ok()) << out.status();
    int gathers = 0;
    for (const UOp* u : Toposort((*out)[0].uop())) gathers += u->op() == Op::kGather;
    EXPECT_EQ(gathers, c.view ? 0 : 1);
    EXPECT_EQ((*out)[0].shape(), c.out);
    ExpectNear(Values((*out)[0]), c.want);
  }
  Builder b;
  b.Input("x", TensorProto::FLOAT, {3, 2, 2}).Output("y");
  b.Init("idx", HostTensor::FromInt64s({3}, {}));
  b.Node("Gather", {"x", "idx"}, {"y"});
  auto m = Load(b);
  ASSERT_TRUE(m);
  auto out = m->Run({F({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 2, 2})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("out of range"), std::string::npos) << out.status();
}

TEST(OnnxModelTest, OpsetDispatch) {
  // Softmax before opset 13 normalizes the flattened [axis:] block.
  for (int64_t opset : {11, 13}) {
    Builder b(opset);
    b.Input("x", TensorProto::FLOAT, {1, 2, 2}).Output("y");
    AttrInt(b.Node("Softmax", {"x"}, {"y"}), "axis", 1);
    auto m = Load(b);
    ASSERT_TRUE(m);
    std::vector<double> y = RunOne(*m, {F({0, 0, 0, 0}, {1, 2, 2})});
    double want = opset == 11 ? 0.25 : 0.5;
    ExpectNear(y, {want, want, want, want});
  }
  // Clip: attributes (opset 6) vs inputs (opset 11+).
  {
    Builder b(6);
    b.Input("x", TensorProto::FLOAT, {3}).Output("y");
    NodeProto* n = b.Node("Clip", {"x"}, {"y"});
    AttrFloat(n, "min", 0);
    AttrFloat(n, "max", 1);
    ExpectNear(RunOne(*Load(b), {F({-1, 0.5, 2}, {3})}), {0, 0.5, 1});
  }
  {
    Builder b(13);
    b.Input("x", TensorProto::FLOAT, {3}).Output("y");
    b.Init("lo", HostTensor::FromDoubles({0}, {}, dtypes::kFloat32));
    b.Node("Clip", {"x", "lo", ""}, {"y"});
    ExpectNear(RunOne(*Load(b), {F({-1, 0.5, 2}, {3})}), {0, 0.5, 2});
  }
  // Slice: attributes (opset 9) vs inputs (opset 10+); Squeeze / ReduceMean axes.
  {
    Builder b(9);
    b.Input("x", TensorProto::FLOAT, {1, 4}).Output("y");
    NodeProto* s = b.Node("Slice", {"x"}, {"s"});
    AttrInts(s, "starts", {1});
    AttrInts(s, "ends", {3});
    AttrInts(s, "axes", {1});
    AttrInts(b.Node("Squeeze", {"s"}, {"q"}), "axes", {0});
    NodeProto* r = b.Node("ReduceMean", {"q"}, {"y"});
    AttrInts(r, "axes", {0});
    AttrInt(r, "keepdims", 0);
    ExpectNear(RunOne(*Load(b), {F({1, 2, 4, 8}, {1, 4})}), {3});
  }
  {
    Builder b(13);
    b.Input("x", TensorProto::FLOAT, {1, 4}).Output("y");
    b.Init("st", HostTensor::Vector({1}));
    b.Init("en", HostTensor::Vector({3}));
    b.Init("ax", HostTensor::Vector({1}));
    b.Init("zero", HostTensor::Vector({0}));
    b.Node("Slice", {"x", "st", "en", "ax"}, {"s"});
    b.Node("Squeeze", {"s", "zero"}, {"y"});
    ExpectNear(RunOne(*Load(b), {F({1, 2, 4, 8}, {1, 4})}), {2, 4});
  }
}

TEST(OnnxModelTest, ErrorsNameTheNode) {
  {
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2}).Output("y");
    b.Node("FancyOp", {"x"}, {"y"}, "n1");
    // Checked at load (engine/onnx/graph_check.h), not at the first run.
    auto m = OnnxModel::LoadFromBytes(b.Bytes(), TestEngine(), "CPU");
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().message(), "node 'n1' (FancyOp): unsupported operator");
  }
  {
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2}).Output("y");
    b.Node("Add", {"x"}, {"y"}, "add0");
    EXPECT_EQ(Load(b)->Run({F({1, 2}, {2})}).status().message(),
              "node 'add0' (Add): expects 2 inputs, got 1");
  }
  {
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2}).Output("y");
    AttrFloat(b.Node("Transpose", {"x"}, {"y"}, "t"), "perm", 1.0f);
    EXPECT_NE(Load(b)->Run({F({1, 2}, {2})}).status().message().find(
                  "node 't' (Transpose): attribute 'perm' has type FLOAT, expected INTS"),
              std::string::npos);
  }
  {
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2}).Output("y");
    b.Node("Relu", {"nope"}, {"y"}, "r");
    EXPECT_NE(OnnxModel::LoadFromBytes(b.Bytes(), TestEngine()).status().message().find(
                  "node 'r' (Relu): input 'nope' is not defined"),
              std::string::npos);
  }
  {
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2, 3}).Output("y");
    b.Init("shape", HostTensor::Vector({4, 4}));
    b.Node("Reshape", {"x", "shape"}, {"y"}, "rs");
    EXPECT_NE(Load(b)->Run({F({1, 2, 3, 4, 5, 6}, {2, 3})}).status().message().find(
                  "node 'rs' (Reshape): cannot reshape (2,3) to (4,4)"),
              std::string::npos);
  }
  {
    Builder b;
    b.Node("Constant", {}, {"c"}, "k");
    b.Output("c");
    EXPECT_NE(OnnxModel::LoadFromBytes(b.Bytes(), TestEngine()).status().message().find(
                  "node 'k' (Constant): Constant needs exactly one value attribute"),
              std::string::npos);
  }
  EXPECT_NE(OnnxModel::LoadFromBytes("garbage bytes", TestEngine()).status().message().find(
                "not a valid ONNX model"),
            std::string::npos);
  EXPECT_EQ(OnnxModel::Load("/nonexistent/model.onnx", TestEngine()).status().code(),
            absl::StatusCode::kNotFound);
  Builder b;
  b.Input("x", TensorProto::FLOAT, {2}).Output("x");
  EXPECT_FALSE(OnnxModel::LoadFromBytes(b.Bytes(), TestEngine(), "NO_SUCH_DEVICE").ok());
}

TEST(OnnxModelTest, InitializersExternalDataAndLegacyInputs) {
  std::string dir = ::testing::TempDir();
  {
    std::ofstream f(dir + "/model_test_w.bin", std::ios::binary);
    float v[2] = {3, 4};
    f.write(reinterpret_cast<const char*>(v), sizeof(v));
  }
  Builder b(9);
  // IR < 4 style: the initializer is listed as a graph input too.
  b.Input("x", TensorProto::FLOAT, {2}).Input("w", TensorProto::FLOAT, {2}).Output("y");
  TensorProto* w = b.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(TensorProto::EXTERNAL);
  auto* loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("model_test_w.bin");
  b.Node("Mul", {"x", "w"}, {"y"});
  {
    std::ofstream f(dir + "/model_test.onnx", std::ios::binary);
    f << b.Bytes();
  }
  auto m = OnnxModel::Load(dir + "/model_test.onnx", TestEngine());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->inputs().size(), 1u);
  EXPECT_EQ((*m)->opsets().at(""), 9);
  ExpectNear(RunOne(**m, {F({1, 2}, {2})}), {3, 8});
  std::remove((dir + "/model_test_w.bin").c_str());
  std::remove((dir + "/model_test.onnx").c_str());
}

// A sparse initializer (or Constant sparse_value) is expanded on the host:
// its dense form is bounded before anything is allocated (found by
// tools/fuzz: an 89-byte model asked for 16 GiB of zeros at load).
TEST(OnnxModelTest, HugeSparseDenseFormIsRefusedBeforeAllocating) {
  for (bool constant : {false, true}) {
    Builder b(13);
    b.Input("x", TensorProto::DOUBLE, {1}).Output("y");
    onnx::SparseTensorProto* sp;
    if (constant) {
      NodeProto* c = b.Node("Constant", {}, {"w"});
      onnx::AttributeProto* a = c->add_attribute();
      a->set_name("sparse_value");
      a->set_type(onnx::AttributeProto::SPARSE_TENSOR);
      sp = a->mutable_sparse_tensor();
    } else {
      sp = b.proto().mutable_graph()->add_sparse_initializer();
    }
    sp->add_dims(int64_t{1} << 31);
    sp->mutable_values()->set_name("w");
    sp->mutable_values()->set_data_type(TensorProto::DOUBLE);
    sp->mutable_values()->add_dims(0);
    sp->mutable_indices()->set_data_type(TensorProto::INT64);
    sp->mutable_indices()->add_dims(0);
    b.Node("Add", {"x", "w"}, {"y"});
    auto m = OnnxModel::LoadFromBytes(b.Bytes(), TestEngine(), "CPU");
    ASSERT_FALSE(m.ok()) << (constant ? "sparse_value" : "sparse initializer");
    EXPECT_NE(m.status().message().find("dense form"), std::string::npos) << m.status();
  }
}

TEST(OnnxModelTest, ModelLocalFunctions) {
  // y = MyScale(x, alpha=3) with MyScale(a) = Mul(a, Constant(value_float=@alpha)).
  Builder b;
  b.Input("x", TensorProto::FLOAT, {2}).Output("y");
  AttributeProto* alpha = b.Node("MyScale", {"x"}, {"y"}, "call")->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(AttributeProto::FLOAT);
  alpha->set_f(3);
  b.proto().mutable_graph()->mutable_node(0)->set_domain("custom");
  auto* o = b.proto().add_opset_import();
  o->set_domain("custom");
  o->set_version(1);
  onnx::FunctionProto* f = b.proto().add_functions();
  f->set_name("MyScale");
  f->set_domain("custom");
  f->add_input("a");
  f->add_output("b");
  f->add_attribute("alpha");
  f->add_opset_import()->set_version(13);
  NodeProto* k = f->add_node();
  k->set_op_type("Constant");
  k->add_output("k");
  AttributeProto* ref = k->add_attribute();
  ref->set_name("value_float");
  ref->set_type(AttributeProto::FLOAT);
  ref->set_ref_attr_name("alpha");
  NodeProto* mul = f->add_node();
  mul->set_op_type("Mul");
  mul->add_input("a");
  mul->add_input("k");
  mul->add_output("b");
  ExpectNear(RunOne(*Load(b), {F({1, 2}, {2})}), {3, 6});
}

TEST(OnnxModelTest, DataDependentShapesAndControlFlow) {
  // NonZero reads its input on the host; If picks a branch from a constant.
  Builder b;
  b.Input("x", TensorProto::FLOAT, {4}).Output("y", TensorProto::INT64);
  b.Node("NonZero", {"x"}, {"y"});
  auto m = Load(b);
  ASSERT_TRUE(m);
  ExpectNear(RunOne(*m, {F({0, 3, 0, 1}, {4})}), {1, 3});
}

// MatMul(q, Transpose(k)) on the CPU: K^T is copied into rows first (one
// more kernel, Tensor::TransposedCopyPays) when q has 16 rows or more.
TEST(OnnxModelTest, MatMulCopiesATransposedOperand) {
  for (int64_t rows : {16, 4}) {
    SCOPED_TRACE(rows);
    Builder b;
    b.Input("q", TensorProto::FLOAT, {2, rows, 8}).Input("k", TensorProto::FLOAT, {2, 12, 8});
    b.Output("y");
    AttrInts(b.Node("Transpose", {"k"}, {"kt"}), "perm", {0, 2, 1});
    b.Node("MatMul", {"q", "kt"}, {"y"});
    auto m = Load(b);
    ASSERT_TRUE(m);
    std::vector<float> q(2 * rows * 8), k(2 * 12 * 8);
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 5) - 2.0f;
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i % 3) - 1.0f;
    Tensor qt = F(q, {2, rows, 8}), kt = F(k, {2, 12, 8});
    ASSERT_TRUE(Tensor::RealizeAll({&qt, &kt}).ok());
    auto out = m->Run({qt, kt});
    ASSERT_TRUE(out.ok()) << out.status();
    uint64_t before = TestEngine()->stats().kernels_run;
    ASSERT_TRUE((*out)[0].Realize().ok());
    EXPECT_EQ(TestEngine()->stats().kernels_run - before, rows >= 16 ? 2u : 1u);
    std::vector<double> y = Values((*out)[0]), want;
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < 12; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < 8; ++c) acc += q[(h * rows + i) * 8 + c] * k[(h * 12 + j) * 8 + c];
          want.push_back(acc);
        }
    EXPECT_EQ(y, want);
  }
}

// Two host reads downstream of one MatMul, whose result is also a graph
// output: the MatMul runs once, not once per read plus once for the output
// (GraphBuilder::ReadOnHost realizes the live values sharing it).
TEST(OnnxModelTest, HostReadsDoNotRecomputeSharedWork) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {16, 64}).Output("h");
  b.Output("a", TensorProto::INT64).Output("c", TensorProto::INT64);
  std::vector<double> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = (i % 7) - 3.0;
  b.Init("w", HostTensor::FromDoubles(w, {64, 64}, dtypes::kFloat32));
  b.Node("MatMul", {"x", "w"}, {"h"});
  b.Node("Relu", {"h"}, {"hp"});
  b.Node("NonZero", {"hp"}, {"a"});
  b.Node("Neg", {"h"}, {"hn"});
  b.Node("Relu", {"hn"}, {"r"});
  b.Node("NonZero", {"r"}, {"c"});
  auto m = Load(b);
  ASSERT_TRUE(m);
  std::vector<float> x(16 * 64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 5) % 11) - 5.0f;
  const double matmul_flops = 2.0 * 16 * 64 * 64;
  double before = TestEngine()->stats().flops_run;
  auto out = m->Run({F(x, {16, 64})});
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<double> h = Values((*out)[0]);
  int64_t positive = 0, negative = 0;
  for (double v : h) positive += v > 0, negative += v < 0;
  EXPECT_EQ((*out)[1].shape(), (Shape{2, positive}));
  EXPECT_EQ((*out)[2].shape(), (Shape{2, negative}));
  EXPECT_LT(TestEngine()->stats().flops_run - before, 1.5 * matmul_flops);
}

// The load checks the graphs (graph_check.h): what could never run fails
// the load, with the place named; valid scoping loads.
TEST(OnnxModelTest, LoadValidatesTheGraph) {
  auto load_error = [](const Builder& b) {
    return std::string(OnnxModel::LoadFromBytes(b.Bytes(), TestEngine()).status().message());
  };
  auto if_reading = [](Builder* b, const std::string& outer_value) {
    b->Init("t", HostTensor::FromInt64s({1}, {}, dtypes::kBool));
    NodeProto* n = b->Node("If", {"t"}, {"y"}, "if");
    for (const char* branch : {"then_branch", "else_branch"}) {
      AttributeProto* a = n->add_attribute();
      a->set_name(branch);
      a->set_type(AttributeProto::GRAPH);
      NodeProto* inner = a->mutable_g()->add_node();
      inner->set_op_type("Neg");
      inner->add_input(outer_value);
      inner->add_output(std::string(branch) + "_out");
      a->mutable_g()->add_output()->set_name(std::string(branch) + "_out");
    }
  };
  {  // A subgraph reads a value of the enclosing graph defined before it.
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2}).Output("y");
    b.Node("Relu", {"x"}, {"r"}, "relu");
    if_reading(&b, "r");
    auto m = Load(b);
    ASSERT_TRUE(m);
    ExpectNear(RunOne(*m, {F({-1, 2}, {2})}), {0, -2});
  }
  {  // ... but not one produced after it.
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2}).Output("y").Output("r");
    if_reading(&b, "r");
    b.Node("Relu", {"x"}, {"r"}, "relu");
    EXPECT_NE(load_error(b).find("node 'if' (If): attribute 'then_branch': node 'then_branch_out' "
                                 "(Neg): input 'r' is not defined"),
              std::string::npos)
        << load_error(b);
  }
  {
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2}).Output("y");
    b.Node("Relu", {"a"}, {"y"}, "late");
    b.Node("Neg", {"x"}, {"a"}, "early");
    EXPECT_EQ(load_error(b),
              "node 'late' (Relu): reads 'a' before node 'early' (Neg) produces it (nodes must be "
              "in topological order)");
  }
  {
    Builder b;
    b.Input("x", TensorProto::FLOAT, {2}).Output("p");
    b.Node("Add", {"x", "q"}, {"p"}, "p");
    b.Node("Relu", {"p"}, {"q"}, "q");
    EXPECT_EQ(load_error(b), "the graph has a cycle: node 'p' (Add) -> node 'q' (Relu) -> node 'p' (Add)");
  }
  {
    Builder b;
    b.Input("x", TensorProto::UNDEFINED, {2}).Output("y");
    b.Node("Relu", {"x"}, {"y"});
    EXPECT_EQ(load_error(b),
              "graph input 'x' has element type UNDEFINED, which kiln does not support");
  }
}

}  // namespace
}  // namespace kiln
