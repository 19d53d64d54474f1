// Writes the binary seeds of the fuzz corpora (run by tests/fuzz/make_corpus):
//   OUT/request/*  serialized ModelInferRequests for the specs of fuzz_util.h:
//                  valid ones (raw and typed contents, parameters, a scalar
//                  sent as [1]) and a few that must be refused;
//   OUT/onnx/*     the robustness suite's hostile models (tests/robustness:
//                  single-file ones) and its request models: small graphs
//                  that load, and files the loader must refuse; and small
//                  valid models of what the loader decodes at load (sparse
//                  initializers, Constant attributes, external data, local
//                  functions), to mutate from.
//
//   make_seeds OUT_DIR
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "engine/onnx/onnx/onnx.pb.h"
#include "proto/grpc_service.pb.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/robustness/hostile_models.h"

namespace kiln::fuzz {
namespace {

using Request = inference::ModelInferRequest;
using Input = Request::InferInputTensor;

bool Write(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

// Adds an input with raw data of `nbytes` bytes (a recognizable pattern).
Input* AddRaw(Request* r, const std::string& name, const std::string& datatype,
              std::vector<int64_t> shape, size_t nbytes) {
  Input* in = r->add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  std::string data(nbytes, '\0');
  for (size_t i = 0; i < nbytes; ++i) data[i] = static_cast<char>(i * 7 + 1);
  r->add_raw_input_contents(data);
  return in;
}

Input* AddTyped(Request* r, const std::string& name, const std::string& datatype,
                std::vector<int64_t> shape) {
  Input* in = r->add_inputs();
  in->set_name(name);
  in->set_datatype(datatype);
  for (int64_t d : shape) in->add_shape(d);
  return in;
}

// The batching model, `b` rows: x [b,2,3] FP32, ids [b,2] INT64, mask [b,3]
// BOOL, h [b,2] FP16.
Request BatchedRaw(int64_t b) {
  Request r;
  r.set_model_name("batched");
  r.set_id("req-1");
  AddRaw(&r, "x", "FP32", {b, 2, 3}, b * 6 * 4);
  AddRaw(&r, "ids", "INT64", {b, 2}, b * 2 * 8);
  AddRaw(&r, "mask", "BOOL", {b, 3}, b * 3);
  AddRaw(&r, "h", "FP16", {b, 2}, b * 2 * 2);
  return r;
}

// The model without batching: sr INT32 scalar, img [2,5] UINT8, x [4] INT16.
Request PlainRaw() {
  Request r;
  r.set_model_name("plain");
  AddRaw(&r, "sr", "INT32", {}, 4);
  AddRaw(&r, "img", "UINT8", {2, 5}, 10);
  AddRaw(&r, "x", "INT16", {4}, 8);
  return r;
}

// The same with typed contents, the scalar sent as shape [1].
Request PlainTyped() {
  Request r;
  r.set_model_name("plain");
  AddTyped(&r, "sr", "INT32", {1})->mutable_contents()->add_int_contents(16000);
  Input* img = AddTyped(&r, "img", "UINT8", {2, 3});
  for (int i = 0; i < 6; ++i) img->mutable_contents()->add_uint_contents(250 + i);
  Input* x = AddTyped(&r, "x", "INT16", {2});
  x->mutable_contents()->add_int_contents(-32768);
  x->mutable_contents()->add_int_contents(32767);
  return r;
}

// X float[4] -> Relu -> Y, with `extra` added to the graph.
std::string ReluModelWith(const std::function<void(onnx::ModelProto*)>& extra) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  for (auto [vi, name] : {std::pair{g->add_input(), "X"}, std::pair{g->add_output(), "Y"}}) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(4);
  }
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Relu");
  n->add_input("X");
  n->add_output("Y");
  extra(&m);
  return m.SerializeAsString();
}

// A sparse tensor of dense shape [4] holding one double at index 2.
void FillSparse(onnx::SparseTensorProto* sp, const std::string& name) {
  sp->add_dims(4);
  onnx::TensorProto* v = sp->mutable_values();
  v->set_name(name);
  v->set_data_type(onnx::TensorProto::DOUBLE);
  v->add_dims(1);
  v->add_double_data(2.5);
  onnx::TensorProto* i = sp->mutable_indices();
  i->set_data_type(onnx::TensorProto::INT64);
  i->add_dims(1);
  i->add_int64_data(2);
}

std::vector<std::pair<std::string, std::string>> LoaderFeatureModels() {
  std::vector<std::pair<std::string, std::string>> out;
  out.push_back({"sparse_initializer", ReluModelWith([](onnx::ModelProto* m) {
                   FillSparse(m->mutable_graph()->add_sparse_initializer(), "S");
                 })});
  out.push_back({"constant_sparse_value", ReluModelWith([](onnx::ModelProto* m) {
                   onnx::NodeProto* c = m->mutable_graph()->add_node();
                   c->set_op_type("Constant");
                   c->add_output("C");
                   onnx::AttributeProto* a = c->add_attribute();
                   a->set_name("sparse_value");
                   a->set_type(onnx::AttributeProto::SPARSE_TENSOR);
                   FillSparse(a->mutable_sparse_tensor(), "C");
                 })});
  out.push_back({"constant_value_floats", ReluModelWith([](onnx::ModelProto* m) {
                   onnx::NodeProto* c = m->mutable_graph()->add_node();
                   c->set_op_type("Constant");
                   c->add_output("C");
                   onnx::AttributeProto* a = c->add_attribute();
                   a->set_name("value_floats");
                   a->set_type(onnx::AttributeProto::FLOATS);
                   for (float f : {1.f, -2.f, 3.f}) a->add_floats(f);
                 })});
  // External data: 16 bytes of the model file itself (the only file next to
  // it when fuzzed).
  out.push_back({"external_self", ReluModelWith([](onnx::ModelProto* m) {
                   onnx::TensorProto* t = m->mutable_graph()->add_initializer();
                   t->set_name("W");
                   t->set_data_type(onnx::TensorProto::FLOAT);
                   t->add_dims(4);
                   t->set_data_location(onnx::TensorProto::EXTERNAL);
                   for (auto [k, v] : {std::pair{"location", "model.onnx"},
                                       std::pair{"offset", "0"}, std::pair{"length", "16"}}) {
                     auto* e = t->add_external_data();
                     e->set_key(k);
                     e->set_value(v);
                   }
                 })});
  // Y = local.Twice(X) through a model-local function.
  out.push_back({"local_function", ReluModelWith([](onnx::ModelProto* m) {
                   onnx::FunctionProto* f = m->add_functions();
                   f->set_name("Twice");
                   f->set_domain("local");
                   f->add_input("a");
                   f->add_output("b");
                   onnx::NodeProto* add = f->add_node();
                   add->set_op_type("Add");
                   add->add_input("a");
                   add->add_input("a");
                   add->add_output("b");
                   f->add_opset_import()->set_version(13);
                   auto* local = m->add_opset_import();
                   local->set_domain("local");
                   local->set_version(1);
                   onnx::NodeProto* n = m->mutable_graph()->mutable_node(0);
                   n->set_op_type("Twice");
                   n->set_domain("local");
                 })});
  return out;
}

std::vector<std::pair<std::string, Request>> Requests() {
  std::vector<std::pair<std::string, Request>> out;
  out.push_back({"batched_raw_b1", BatchedRaw(1)});
  {
    Request r = BatchedRaw(3);
    (*r.mutable_parameters())["priority"].set_int64_param(2);
    (*r.mutable_parameters())["timeout"].set_int64_param(1500);
    (*r.mutable_parameters())["binary_data_output"].set_bool_param(true);
    r.add_outputs()->set_name("y");
    out.push_back({"batched_raw_b3_params", r});
  }
  {  // Typed contents; FP16 cannot be typed, so this one is refused at "h".
    Request r;
    Input* x = AddTyped(&r, "x", "FP32", {1, 1, 3});
    for (float v : {0.5f, -1.0f, 3e38f}) x->mutable_contents()->add_fp32_contents(v);
    Input* ids = AddTyped(&r, "ids", "INT64", {1, 2});
    ids->mutable_contents()->add_int64_contents(INT64_MIN);
    ids->mutable_contents()->add_int64_contents(7);
    Input* mask = AddTyped(&r, "mask", "BOOL", {1, 2});
    mask->mutable_contents()->add_bool_contents(true);
    mask->mutable_contents()->add_bool_contents(false);
    AddTyped(&r, "h", "FP16", {1, 2})->mutable_contents()->add_fp32_contents(1);
    out.push_back({"batched_typed_fp16_refused", r});
  }
  out.push_back({"plain_raw", PlainRaw()});
  out.push_back({"plain_typed_scalar_as_1", PlainTyped()});
  {
    Request r = PlainTyped();
    r.mutable_inputs(2)->mutable_contents()->set_int_contents(0, 70000);  // not an INT16
    out.push_back({"plain_typed_out_of_range", r});
  }
  {
    Request r = BatchedRaw(1);
    *r.add_inputs() = r.inputs(0);
    r.add_raw_input_contents(r.raw_input_contents(0));
    out.push_back({"batched_input_twice", r});
  }
  {
    Request r = BatchedRaw(2);
    r.mutable_inputs(0)->set_shape(1, int64_t{1} << 62);
    out.push_back({"batched_shape_overflow", r});
  }
  {
    Request r = PlainRaw();
    (*r.mutable_parameters())["sequence_id"].set_uint64_param(5);
    out.push_back({"plain_sequence_refused", r});
  }
  return out;
}

}  // namespace
}  // namespace kiln::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  int n = 0;
  bool ok = true;
  for (const auto& [name, req] : kiln::fuzz::Requests()) {
    ok &= kiln::fuzz::Write(out + "/request/" + name + ".pb", req.SerializeAsString());
    ++n;
  }
  using kiln::hostile::HostileCase;
  std::vector<HostileCase> cases = kiln::hostile::LoadCases();
  for (HostileCase& c : kiln::hostile::RunCases()) cases.push_back(std::move(c));
  for (const HostileCase& c : cases) {
    // Single-file models only (no FIFOs, links or external data files), and
    // small: seeds should be quick to mutate.
    if (c.file != HostileCase::File::kBytes || !c.files.empty() || !c.fifos_links.empty() ||
        c.model.size() > 8192)
      continue;
    ok &= kiln::fuzz::Write(out + "/onnx/hostile_" + c.name + ".onnx", c.model);
    ++n;
  }
  for (const kiln::hostile::RequestModel& m : kiln::hostile::RequestModels()) {
    ok &= kiln::fuzz::Write(out + "/onnx/request_" + m.name + ".onnx", m.model);
    ++n;
  }
  ok &= kiln::fuzz::Write(out + "/onnx/dynamic_relu.onnx", kiln::hostile::DynamicReluModel());
  ++n;
  for (const auto& [name, bytes] : kiln::fuzz::LoaderFeatureModels()) {
    ok &= kiln::fuzz::Write(out + "/onnx/" + name + ".onnx", bytes);
    ++n;
  }
  std::printf("make_seeds: %d files into %s\n", n, out.c_str());
  return ok ? 0 : 1;
}
