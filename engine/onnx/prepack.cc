#include "engine/onnx/prepack.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"

namespace kiln {
namespace {

// How many times each name is read as a node input, in `g` and in every
// subgraph below it (a subgraph may read the outer graph's values).
void CountReads(const onnx::GraphProto& g, std::map<std::string, int>* reads) {
  for (const onnx::NodeProto& n : g.node()) {
    for (const std::string& in : n.input()) ++(*reads)[in];
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) CountReads(a.g(), reads);
      for (const onnx::GraphProto& sub : a.graphs()) CountReads(sub, reads);
    }
  }
  for (const onnx::ValueInfoProto& out : g.output()) ++(*reads)[out.name()];
}

// The node's transB attribute when it is an INT equal to 1.
onnx::AttributeProto* TransB(onnx::NodeProto* n) {
  for (onnx::AttributeProto& a : *n->mutable_attribute())
    if (a.name() == "transB")
      return a.type() == onnx::AttributeProto::INT && a.i() == 1 ? &a : nullptr;
  return nullptr;
}

// Transposes a (rows, cols) matrix of `size`-byte elements in place.
void Transpose(std::string* bytes, int64_t rows, int64_t cols, size_t size) {
  std::string out(bytes->size(), '\0');
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&out[(c * rows + r) * size], &(*bytes)[(r * cols + c) * size], size);
  bytes->swap(out);
}

// Transposes initializer `t` (2-D) in place; false when its data is not in
// a form handled here (external data, typed fields other than float_data,
// or a size that does not match its dims: the loader reports those).
bool TransposeInitializer(onnx::TensorProto* t) {
  if (t->dims_size() != 2 || t->data_location() == onnx::TensorProto::EXTERNAL) return false;
  const int64_t rows = t->dims(0), cols = t->dims(1);
  if (rows <= 0 || cols <= 0 || rows > (int64_t{1} << 31) / cols) return false;
  std::optional<DType> dt = DTypeFromOnnx(t->data_type());
  if (!dt || dt->ItemSize() <= 0) return false;
  const size_t size = static_cast<size_t>(dt->ItemSize());
  if (t->has_raw_data()) {
    if (t->raw_data().size() != static_cast<size_t>(rows * cols) * size) return false;
    Transpose(t->mutable_raw_data(), rows, cols, size);
  } else if (t->data_type() == onnx::TensorProto::FLOAT && t->float_data_size() == rows * cols) {
    std::vector<float> in(t->float_data().begin(), t->float_data().end());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) t->set_float_data(c * rows + r, in[r * cols + c]);
  } else {
    return false;
  }
  t->set_dims(0, cols);
  t->set_dims(1, rows);
  return true;
}

}  // namespace

int PrepackWeights(onnx::ModelProto* model) {
  if (!model->has_graph()) return 0;
  onnx::GraphProto* g = model->mutable_graph();
  std::map<std::string, int> reads;
  CountReads(*g, &reads);
  // Gemm nodes of the main graph reading each name as a transposed B.
  std::map<std::string, std::vector<onnx::AttributeProto*>> gemm_b;
  for (onnx::NodeProto& n : *g->mutable_node()) {
    if (n.op_type() != "Gemm" || !(n.domain().empty() || n.domain() == "ai.onnx") ||
        n.input_size() < 2)
      continue;
    if (onnx::AttributeProto* tb = TransB(&n)) gemm_b[n.input(1)].push_back(tb);
  }
  int packed = 0;
  for (onnx::TensorProto& t : *g->mutable_initializer()) {
    auto it = gemm_b.find(t.name());
    if (it == gemm_b.end() || reads[t.name()] != static_cast<int>(it->second.size())) continue;
    if (!TransposeInitializer(&t)) continue;
    for (onnx::AttributeProto* tb : it->second) tb->set_i(0);
    ++packed;
  }
  return packed;
}

}  // namespace kiln
