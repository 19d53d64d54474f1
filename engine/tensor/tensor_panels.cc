// A matmul's constant weight B (K, N) stored as panels (ceil(N / P), K, P):
// for each k the P columns of a panel are adjacent. A CPU matmul reads B
// as its vector operand, a few vectors of one row per K step; stored
// (K, N), consecutive steps are N * 4 bytes apart, and for N in the
// thousands every step touches new pages and the hardware prefetcher
// falls behind. In panels each tile streams one contiguous block.
// (ConvNeXt-T's 49 x 768 x 3072 layer, the generated kernel alone: 85 ->
// 170 GFLOP/s.)
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tensor/tensor.h"
#include "engine/tensor/tensor_internal.h"

namespace kiln {

// On the host, like the Winograd weights: a permuting copy as a device
// kernel would be one more kernel to compile per weight shape at start.
Tensor Tensor::PanelWeights(int64_t panel, bool transposed) const {
  if (!ok()) return *this;
  if (ndim() != 2 || dtype() != dtypes::kFloat32 || panel < 1)
    return Fail(*this, absl::StrCat("panels: weight ", ShapeStr(shape()), " of ", dtype().Name(),
                                    " is not a 2-D float32 matrix"));
  const int64_t k = transposed ? shape()[1] : shape()[0];
  const int64_t n = transposed ? shape()[0] : shape()[1];
  const int64_t nb = (n + panel - 1) / panel;
  // Read from and written to the device buffers themselves where they are
  // host memory (Swin-T's first call: 0.3 s less than through vectors);
  // the reads run along the weight's rows (a transposed one column by
  // column).
  Tensor copy = *this, out;
  absl::Status read = copy.ReadHost([&](const void* src) {
    const float* w = static_cast<const float*>(src);
    out = FromFill(engine(), {nb, k, panel}, dtype(), device(), [&](void* dst) {
      float* p = static_cast<float*>(dst);
      auto at = [&](int64_t kk, int64_t j) -> float& {
        return p[static_cast<size_t>(((j / panel) * k + kk) * panel + j % panel)];
      };
      if (transposed) {
        for (int64_t j = 0; j < n; ++j)
          for (int64_t kk = 0; kk < k; ++kk) at(kk, j) = w[j * k + kk];
      } else {
        for (int64_t kk = 0; kk < k; ++kk)
          for (int64_t j = 0; j < n; ++j) at(kk, j) = w[kk * n + j];
      }
      for (int64_t j = n; j < nb * panel; ++j)  // the last panel's padding
        for (int64_t kk = 0; kk < k; ++kk) at(kk, j) = 0.0f;
    });
  });
  if (!read.ok()) return TensorInternal::ErrorLike(*this, read);
  return out;
}

Tensor Tensor::MatmulPanels(const Tensor& panels, int64_t n) const {
  if (!ok()) return *this;
  if (!panels.ok()) return panels;
  const Shape& ps = panels.shape();
  if (ndim() < 1 || panels.ndim() != 3 || ps[1] != shape().back() || n < 1 ||
      n > ps[0] * ps[2] || n <= (ps[0] - 1) * ps[2])
    return Fail(*this, absl::StrCat("matmul: ", ShapeStr(shape()), " and panels ", ShapeStr(ps),
                                    " of ", n, " columns do not align"));
  const int64_t nb = ps[0], k = ps[1], p = ps[2];
  Tensor a = ndim() == 1 ? Reshape({1, k}) : *this;
  // a (..., M, K) -> (..., M, 1, 1, K);  panels -> (NB, P, K)
  Tensor r = (a.Unsqueeze(-2).Unsqueeze(-2) * panels.Permute({0, 2, 1})).Sum({-1});
  Shape out(a.shape().begin(), a.shape().end() - 1);
  out.push_back(nb * p);
  r = r.Reshape(out);
  if (nb * p != n) {
    Pads keep;
    for (int64_t d : out) keep.push_back({0, d});
    keep.back().second = n;
    r = r.Shrink(keep);
  }
  return ndim() == 1 ? r.Reshape({n}) : r;
}

// Panels of 32 floats: two 512-bit vectors or four 256-bit ones, 128 bytes
// (two cache lines) per K step. A weight stored (K, N) is read along its
// rows, which the kernel vectorizes along N as it would panels: panels pay
// when B's rows are several panels long, B does not sit in L1 anyway, and
// a few rows share each panel. A weight stored transposed, (N, K), is read
// along K without panels: a dot product per output, whose lanes end in a
// horizontal sum and whose epilogue runs one lane at a time. For 4 rows or
// more its panels pay at any size (1 thread: the tanh RNN's 128 x 128
// recurrent step at batch 8 12 -> ~3 us); for fewer, when it fits in
// kPanelsFewRowsBytes, a core's L2 here, where a weight read at every step
// of a recurrent op stays (LSTM-1000's 1 MiB R at batch 1: its steps 17.7
// -> 14.4 ms). A larger one is read once a call and streams from L3:
// classifiers at batch 1 gained (EfficientNet-B0's 1280 x 1000 148 -> 71
// us), but in batch slices, one classifier per image in a row, the dot
// products ran 44 us against the panels' 113 (MobileNetV2).
bool Tensor::PanelsPay(int64_t m, int64_t k, int64_t n, bool transposed) {
  if (n < 2 * kPanel) return false;
  const int64_t bytes = k * n * 4;
  if (m < 4) return transposed && bytes <= kPanelsFewRowsBytes;
  return transposed || bytes > (64 << 10);
}

}  // namespace kiln
