#include "engine/onnx/prepack.h"

#include <cstring>
#include <map>
#include <vector>

#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/tensor/tensor.h"

namespace kiln {
namespace {

// Only long reductions are repacked (K >= kMatmulSplitKMin): Tensor::Matmul
// splits them into chunks, and a chunk of the (K, N) layout is read by the
// broadcast tile at ~100 GFLOP/s. A short K is a classifier's matrix-vector
// product at batch 1 just as often, which reads the (N, K) layout faster
// (mobilenet_v3_small's 576 x 1024 and 1024 x 1000 heads: 1.3x slower
// transposed).

// How many times each name is read as a node input or graph output, in `g`
// and in every subgraph below it (a subgraph may read the outer graph).
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

}  // namespace

std::set<std::string> PlanPrepack(onnx::ModelProto* model) {
  std::set<std::string> out;
  if (!model->has_graph()) return out;
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
  std::map<std::string, int> inits;  // a name defined twice is left alone
  for (const onnx::TensorProto& t : g->initializer()) ++inits[t.name()];
  for (const onnx::TensorProto& t : g->initializer()) {
    auto it = gemm_b.find(t.name());
    if (it == gemm_b.end() || t.dims_size() != 2 || inits[t.name()] != 1 ||
        reads[t.name()] != static_cast<int>(it->second.size()) || t.dims(1) < kMatmulSplitKMin)
      continue;
    for (onnx::AttributeProto* tb : it->second) tb->set_i(0);
    out.insert(t.name());
  }
  return out;
}

std::string TransposeBytes(const void* bytes, int64_t rows, int64_t cols, size_t item) {
  const char* in = static_cast<const char*>(bytes);
  std::string out(static_cast<size_t>(rows * cols) * item, '\0');
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&out[static_cast<size_t>(c * rows + r) * item],
                  in + static_cast<size_t>(r * cols + c) * item, item);
  return out;
}

}  // namespace kiln
