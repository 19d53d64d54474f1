// Weight pre-packing: layout changes of initializers, decided on the model
// proto at load and applied as the weights are uploaded (once), so the
// kernels that read them run faster. Each change is a rule on the graph,
// never on a model's name.
//
// Gemm with transB = 1 reads its weight B, stored (N, K), transposed: the
// matmul then reduces along rows of both operands, a dot-product tile of a
// few outputs per K step. Stored (K, N), the weight's rows run along the
// output row, and the matmul takes the broadcast tile (a weight vector
// reused by 6-8 rows of A: ~100 outputs per K step; a 12544 x 1024 box head
// measured 1.4x faster). PlanPrepack clears transB on such a node and names
// B for a transposed upload when B is a 2-D initializer with K >= 4096 (a
// split-K matmul; see prepack.cc for why not shorter) and every use of it,
// anywhere in the model, is the B input of a transB = 1 Gemm of the main
// graph.
#ifndef KILN_ENGINE_ONNX_PREPACK_H_
#define KILN_ENGINE_ONNX_PREPACK_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace kiln {

// Applies the rules above to `model`'s nodes; returns the initializers to
// upload transposed (TransposeBytes).
std::set<std::string> PlanPrepack(onnx::ModelProto* model);

// A row-major (rows, cols) matrix of `item`-byte elements, transposed.
std::string TransposeBytes(const void* bytes, int64_t rows, int64_t cols, size_t item);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_PREPACK_H_
