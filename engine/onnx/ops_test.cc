// Operators and opset forms that ONNX 1.12's backend tests do not cover,
// checked against hand-computed values.
#include <cmath>

#include "engine/base/status.h"
#include "engine/onnx/model.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

using onnx::AttributeProto;
using onnx::TensorProto;

// One node `op` with inputs x0, x1, ... (all graph inputs) and outputs y0, ...
class NodeModel {
 public:
  NodeModel(const std::string& op, int n_in, int n_out, int64_t opset = 17) {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_version(opset);
    node_ = m_.mutable_graph()->add_node();
    node_->set_op_type(op);
    node_->set_name("n");
    for (int i = 0; i < n_in; ++i) node_->add_input("x" + std::to_string(i));
    for (int i = 0; i < n_out; ++i) {
      node_->add_output("y" + std::to_string(i));
      m_.mutable_graph()->add_output()->set_name("y" + std::to_string(i));
    }
  }
  NodeModel& Int(const std::string& name, int64_t v) {
    AttributeProto* a = Add(name, AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  NodeModel& Float(const std::string& name, float v) {
    Add(name, AttributeProto::FLOAT)->set_f(v);
    return *this;
  }
  NodeModel& Str(const std::string& name, const std::string& v) {
    Add(name, AttributeProto::STRING)->set_s(v);
    return *this;
  }
  NodeModel& Ints(const std::string& name, const std::vector<int64_t>& v) {
    AttributeProto* a = Add(name, AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
  NodeModel& Floats(const std::string& name, const std::vector<float>& v) {
    AttributeProto* a = Add(name, AttributeProto::FLOATS);
    for (float x : v) a->add_floats(x);
    return *this;
  }
  // Runs with the given inputs; returns output `i`.
  absl::StatusOr<Tensor> Run(const std::vector<Tensor>& in, int i = 0) {
    for (size_t k = m_.graph().input_size(); k < in.size(); ++k) {
      auto* v = m_.mutable_graph()->add_input();
      v->set_name("x" + std::to_string(k));
      v->mutable_type()->mutable_tensor_type()->set_elem_type(OnnxTypeOf(in[k].dtype()));
    }
    ASSIGN_OR_RETURN(auto model, OnnxModel::LoadFromBytes(m_.SerializeAsString(), TestEngine()));
    ASSIGN_OR_RETURN(std::vector<Tensor> outs, model->Run(in));
    return outs[i];
  }

 private:
  AttributeProto* Add(const std::string& name, AttributeProto::AttributeType t) {
    AttributeProto* a = node_->add_attribute();
    a->set_name(name);
    a->set_type(t);
    return a;
  }
  onnx::ModelProto m_;
  onnx::NodeProto* node_;
};

Tensor F(const std::vector<float>& v, Shape s) { return Tensor::FromFloats(TestEngine(), v, s); }
Tensor I64(const std::vector<int64_t>& v, Shape s) {
  return Tensor::FromVector(TestEngine(), v, s, dtypes::kInt64);
}
std::vector<double> V(absl::StatusOr<Tensor> t) {
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? Values(*t) : std::vector<double>{};
}

TEST(OnnxOpsTest, Activations) {
  Tensor x = F({-2, -0.5, 0, 1.5}, {4});
  std::vector<double> mish, gelu;
  for (double v : {-2.0, -0.5, 0.0, 1.5}) {
    mish.push_back(v * std::tanh(std::log1p(std::exp(v))));
    gelu.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
  }
  ExpectNear(V(NodeModel("Mish", 1, 1, 18).Run({x})), mish);
  ExpectNear(V(NodeModel("Gelu", 1, 1, 20).Run({x})), gelu);
  ExpectNear(V(NodeModel("Shrink", 1, 1).Float("lambd", 1).Float("bias", 0.5).Run({x})),
             {-1.5, 0, 0, 1});
}

TEST(OnnxOpsTest, NormalizationsAndBitwise) {
  ExpectNear(V(NodeModel("LpNormalization", 1, 1).Int("p", 1).Run({F({1, 3, 2, 2}, {2, 2})})),
             {0.25, 0.75, 0.5, 0.5});
  // GroupNormalization (opset 18: scale / bias per group): 2 groups of 2 channels.
  Tensor x = F({1, 3, 5, 7}, {1, 4, 1, 1});
  std::vector<double> g = V(NodeModel("GroupNormalization", 3, 1, 18)
                                .Int("num_groups", 2)
                                .Float("epsilon", 0)
                                .Run({x, F({1, 2}, {2}), F({0, 10}, {2})}));
  ExpectNear(g, {-1, 1, 8, 12});
  Tensor a = Tensor::FromVector<int32_t>(TestEngine(), {12, 10}, {2}, dtypes::kInt32);
  Tensor b = Tensor::FromVector<int32_t>(TestEngine(), {10, 3}, {2}, dtypes::kInt32);
  ExpectNear(V(NodeModel("BitwiseAnd", 2, 1, 18).Run({a, b})), {8, 2});
  ExpectNear(V(NodeModel("BitwiseNot", 1, 1, 18).Run({a})), {-13, -11});
}

TEST(OnnxOpsTest, EinsumForms) {
  Tensor a = F({1, 2, 3, 4}, {2, 2});
  // Implicit output (alphabetical): "ij,jk" -> "ik" is a matmul.
  ExpectNear(V(NodeModel("Einsum", 2, 1).Str("equation", "ij,jk").Run({a, a})), {7, 10, 15, 22});
  ExpectNear(V(NodeModel("Einsum", 1, 1).Str("equation", "ii->").Run({a})), {5});  // trace
  ExpectNear(V(NodeModel("Einsum", 1, 1).Str("equation", "...j->...").Run({a})), {3, 7});
}

TEST(OnnxOpsTest, LegacyForms) {
  // Cast-1 names the target type; Upsample-7 has its scales as an attribute.
  ExpectNear(V(NodeModel("Cast", 1, 1, 1).Str("to", "INT32").Run({F({1.7f, -2.2f}, {2})})),
             {1, -2});
  ExpectNear(V(NodeModel("Upsample", 1, 1, 7).Floats("scales", {1, 2}).Run({F({1, 2}, {1, 2})})),
             {1, 1, 2, 2});
  // Binary ops before opset 7 broadcast with broadcast=1 / axis.
  ExpectNear(V(NodeModel("Add", 2, 1, 6).Int("broadcast", 1).Int("axis", 0)
                   .Run({F({1, 2, 3, 4}, {2, 2}), F({10, 20}, {2})})),
             {11, 12, 23, 24});
  // Split-18 with num_outputs and an uneven last chunk; Pad wrap (opset 19 mode).
  ExpectNear(V(NodeModel("Split", 1, 2, 18).Int("num_outputs", 2).Run({F({1, 2, 3}, {3})}, 1)),
             {3});
  ExpectNear(V(NodeModel("Pad", 2, 1, 19).Str("mode", "wrap").Run({F({1, 2, 3}, {3}),
                                                                     I64({1, 2}, {2})})),
             {3, 1, 2, 3, 1, 2});
}

TEST(OnnxOpsTest, MaxRoiPool) {
  Tensor x = F({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
  Tensor rois = F({0, 0, 0, 3, 3, 0, 1, 1, 2, 2}, {2, 5});
  ExpectNear(V(NodeModel("MaxRoiPool", 2, 1).Ints("pooled_shape", {2, 2}).Run({x, rois})),
             {6, 8, 14, 16, 6, 7, 10, 11});
}

// RoiAlign (mode avg) computed directly: each bin averages the bilinear
// samples of its grid (ONNX's reference semantics).
std::vector<double> RoiAlignReference(const std::vector<float>& x, Shape xs,
                                      const std::vector<float>& rois,
                                      const std::vector<int64_t>& batch, int64_t ph, int64_t pw,
                                      int64_t ratio, double scale, bool half_pixel) {
  const int64_t c_n = xs[1], h = xs[2], w = xs[3];
  std::vector<double> out;
  for (size_t r = 0; r < batch.size(); ++r) {
    const double off = half_pixel ? 0.5 : 0;
    double x0 = rois[r * 4] * scale - off, y0 = rois[r * 4 + 1] * scale - off;
    double rw = rois[r * 4 + 2] * scale - off - x0, rh = rois[r * 4 + 3] * scale - off - y0;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const int64_t gh = ratio, gw = ratio;
    for (int64_t c = 0; c < c_n; ++c)
      for (int64_t py = 0; py < ph; ++py)
        for (int64_t px = 0; px < pw; ++px) {
          double sum = 0;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix) {
              double y = y0 + (py + (iy + 0.5) / gh) * rh / ph;
              double xx = x0 + (px + (ix + 0.5) / gw) * rw / pw;
              if (y < -1 || y > h || xx < -1 || xx > w) continue;
              y = std::min(std::max(y, 0.0), double(h - 1));
              xx = std::min(std::max(xx, 0.0), double(w - 1));
              int64_t y1 = int64_t(y), x1 = int64_t(xx);
              int64_t y2 = std::min(y1 + 1, h - 1), x2 = std::min(x1 + 1, w - 1);
              double ly = y - y1, lx = xx - x1;
              auto at = [&](int64_t yy, int64_t xv) {
                return double(x[((batch[r] * c_n + c) * h + yy) * w + xv]);
              };
              sum += (1 - ly) * (1 - lx) * at(y1, x1) + (1 - ly) * lx * at(y1, x2) +
                     ly * (1 - lx) * at(y2, x1) + ly * lx * at(y2, x2);
            }
          out.push_back(sum / double(gh * gw));
        }
  }
  return out;
}

// RoiAlign gathers the few taps of each bin from a large map, and multiplies
// by dense weights when the map is so small that taps cover it; both agree
// with the direct computation.
TEST(OnnxOpsTest, RoiAlignGatherAndDenseForms) {
  for (Shape xs : {Shape{2, 3, 9, 11}, Shape{2, 3, 2, 2}}) {
    std::vector<float> x(Prod(xs));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * double(i)) * 3;
    std::vector<float> rois = {0.5f, 1.0f, 6.0f, 7.5f,  2.0f, 0.0f, 9.0f, 3.0f,
                               -1.0f, -1.0f, 4.0f, 12.0f, 1.0f, 1.0f, 1.5f, 1.5f};
    std::vector<int64_t> batch = {1, 0, 1, 0};
    for (bool half : {false, true}) {
      auto got = V(NodeModel("RoiAlign", 3, 1, half ? 16 : 10)
                       .Int("output_height", 3)
                       .Int("output_width", 2)
                       .Int("sampling_ratio", 2)
                       .Float("spatial_scale", 0.75f)
                       .Run({F(x, xs), F(rois, {4, 4}), I64(batch, {4})}));
      ExpectNear(got, RoiAlignReference(x, xs, rois, batch, 3, 2, 2, 0.75, half), 1e-4);
    }
  }
}

// ScatterND without a reduction: rows land at their indices, the last of
// duplicate indices wins (as a sequential loop), others pass through.
TEST(OnnxOpsTest, ScatterNdRowsAndDuplicates) {
  ExpectNear(V(NodeModel("ScatterND", 3, 1).Run({F({0, 0, 0, 0}, {4}), I64({1, 1, 3}, {3, 1}),
                                                 F({5, 7, 9}, {3})})),
             {0, 7, 0, 9});
  ExpectNear(V(NodeModel("ScatterND", 3, 1).Run({F({1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}, {4, 3}),
                                                 I64({2, -4}, {2, 1}),
                                                 F({10, 11, 12, 20, 21, 22}, {2, 3})})),
             {20, 21, 22, 2, 2, 2, 10, 11, 12, 4, 4, 4});
}

TEST(OnnxOpsTest, RandomOps) {
  auto u1 = V(NodeModel("RandomUniform", 0, 1).Ints("shape", {1000}).Float("low", 2)
                  .Float("high", 3).Float("seed", 7).Run({}));
  auto u2 = V(NodeModel("RandomUniform", 0, 1).Ints("shape", {1000}).Float("low", 2)
                  .Float("high", 3).Float("seed", 7).Run({}));
  ASSERT_EQ(u1.size(), 1000u);
  EXPECT_EQ(u1, u2) << "a seed makes the values reproducible";
  double mean = 0;
  for (double v : u1) {
    EXPECT_TRUE(v >= 2 && v < 3);
    mean += v / 1000;
  }
  EXPECT_NEAR(mean, 2.5, 0.05);
  auto n = V(NodeModel("RandomNormalLike", 1, 1).Float("mean", 5).Run({F(std::vector<float>(2000, 0), {2000})}));
  double m = 0;
  for (double v : n) m += v / 2000;
  EXPECT_NEAR(m, 5, 0.1);
  // A near-certain class and certain Bernoulli draws.
  auto s = V(NodeModel("Multinomial", 1, 1).Int("sample_size", 5)
                 .Run({F({-50, 50, -50}, {1, 3})}));
  EXPECT_EQ(s, std::vector<double>(5, 1));
  ExpectNear(V(NodeModel("Bernoulli", 1, 1).Run({F({0, 1, 0, 1}, {4})})), {0, 1, 0, 1});
}

TEST(OnnxOpsTest, BadAttributesAreErrors) {
  auto r = NodeModel("Resize", 1, 1, 13).Str("mode", "quadratic").Run({F({1, 2}, {2})});
  EXPECT_NE(r.status().message().find("node 'n' (Resize): unknown mode 'quadratic'"),
            std::string::npos)
      << r.status();
  auto p = NodeModel("Pad", 2, 1).Str("mode", "mirror").Run({F({1, 2}, {2}), I64({1, 1}, {2})});
  EXPECT_NE(p.status().message().find("pad mode 'mirror' is not supported"), std::string::npos);
  auto c = NodeModel("Cast", 1, 1).Int("to", TensorProto::STRING).Run({F({1}, {1})});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  auto d = NodeModel("DepthToSpace", 1, 1).Int("blocksize", 3).Run({F({1, 2, 3, 4}, {1, 4, 1, 1})});
  EXPECT_FALSE(d.ok());
  // An attribute no handler path reads is reported instead of ignored.
  auto u = NodeModel("Relu", 1, 1).Float("alpha", 0.1f).Run({F({1}, {1})});
  EXPECT_EQ(u.status().message(), "node 'n' (Relu): attribute 'alpha' is not supported");
}

}  // namespace
}  // namespace kiln
