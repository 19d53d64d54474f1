// Weight pre-packing: layout changes of initializers, made once on the
// model proto at load (before the weights are uploaded), so the kernels
// that read them run faster. Each change is a rule on the graph, never on
// a model's name.
//
// Gemm with transB = 1 reads its weight B, stored (N, K), transposed: the
// matmul then reduces along rows of both operands, a dot-product tile of a
// few outputs per K step. Stored (K, N), the weight's rows run along the
// output row, and the matmul takes the broadcast tile (a weight vector
// reused by 6-8 rows of A: ~100 outputs per K step; a 12544 x 1024 box head
// measured 1.4x faster). PrepackWeights transposes such a B and clears the
// node's transB when B is a 2-D initializer held in raw_data or float_data
// and every use of it, anywhere in the model, is the B input of a
// transB = 1 Gemm of the main graph.
#ifndef KILN_ENGINE_ONNX_PREPACK_H_
#define KILN_ENGINE_ONNX_PREPACK_H_

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace kiln {

// Applies the rules above; returns how many initializers changed layout.
int PrepackWeights(onnx::ModelProto* model);

}  // namespace kiln

#endif  // KILN_ENGINE_ONNX_PREPACK_H_
