// Internals shared by the tensor_*.cc files (not part of the API).
#ifndef KILN_ENGINE_TENSOR_TENSOR_INTERNAL_H_
#define KILN_ENGINE_TENSOR_TENSOR_INTERNAL_H_

#include <memory>
#include <string>

#include "engine/tensor/tensor.h"

namespace kiln {

struct Tensor::State {
  Engine* engine = nullptr;
  std::string device;
  UOpRef uop;
  Shape shape;
  DType dtype;
  absl::Status error;
};

struct TensorInternal {
  static Tensor Wrap(std::shared_ptr<Tensor::State> s) { return Tensor(std::move(s)); }
  static Tensor ErrorLike(const Tensor& like, absl::Status s) {
    return Tensor::FromError(like, std::move(s));
  }
};

std::string ShapeStr(const Shape& s);
// The float type float-valued ops compute in (float32 for integer inputs).
DType FloatType(DType t);

}  // namespace kiln

#endif  // KILN_ENGINE_TENSOR_TENSOR_INTERNAL_H_
