#include "tests/robustness/hostile_models.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "tests/robustness/hostile_builder.h"

namespace kiln::hostile {

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

}  // namespace kiln::hostile
