// Writes models/simple/1/model.onnx, the small model kiln ships so that a
// fresh checkout has something to serve and test against:
//
//   INPUT0, INPUT1: float32 [N, 16]   (N dynamic)
//   OUTPUT0 = INPUT0 + INPUT1
//   OUTPUT1 = Relu(INPUT0 * INPUT1)
//
//   bazel run //models:make_simple_model -- $PWD/models/simple/1/model.onnx
#include <cstdio>
#include <fstream>
#include <string>

#include "onnx/onnx.pb.h"

namespace {

void AddTensor(onnx::ValueInfoProto* v, const std::string& name) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_param("N");
  t->mutable_shape()->add_dim()->set_dim_value(16);
}

void AddNode(onnx::GraphProto* g, const std::string& op, std::initializer_list<std::string> in,
             const std::string& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out + "_" + op);
  for (const std::string& i : in) n->add_input(i);
  n->add_output(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_simple_model OUT.onnx\n");
    return 2;
  }
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kiln make_simple_model");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("simple");
  AddTensor(g->add_input(), "INPUT0");
  AddTensor(g->add_input(), "INPUT1");
  AddNode(g, "Add", {"INPUT0", "INPUT1"}, "OUTPUT0");
  AddNode(g, "Mul", {"INPUT0", "INPUT1"}, "product");
  AddNode(g, "Relu", {"product"}, "OUTPUT1");
  AddTensor(g->add_output(), "OUTPUT0");
  AddTensor(g->add_output(), "OUTPUT1");
  std::string bytes;
  if (!m.SerializeToString(&bytes)) {
    std::fprintf(stderr, "make_simple_model: cannot serialize\n");
    return 1;
  }
  std::ofstream f(argv[1], std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "make_simple_model: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
