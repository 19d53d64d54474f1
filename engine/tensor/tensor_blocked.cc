// Activations in channel blocks: (N, C / 16, H, W, 16), each block of 16
// channels one vector per pixel (onnxruntime's NCHWc). The CPU codegen
// vectorizes a kernel's output along its contiguous axis; in NCHW that is
// the pixels, so a small map wastes lanes (49 pixels in 64 lanes, 196 in
// 224) and a stride-2 window reads two vectors and a shuffle per tap. In
// blocks the lanes are channels: every lane is used whatever the map, a
// stride-2 tap is one vector load, and a 1x1 convolution's tile is 7 or 8
// pixels x 2 channel blocks (kernel_cpu.cc step 3). The ONNX importer keeps
// chains of such layers in blocks (engine/onnx/channel_blocks.cc).
// Measured on the kernels alone (1 thread, AVX-512, minima, us; NCHW ->
// blocked): 1x1 512 -> 2048 on 7 x 7 583 -> 451, 2048 -> 512 on 7 x 7
// 587 -> 474, 192 -> 1152 on 7 x 7 123 -> 94, 256 -> 1024 on 14 x 14
// 596 -> 451, 96 -> 576 on 14 x 14 110 -> 94; on 56 x 56 and 112 x 112,
// where NCHW wastes no lanes, equal. A dense convolution in blocks
// broadcasts each tap's 16 input channels against 16 output channels (3x3
// 512 -> 512 on 7 x 7: 1039 us, against 1571 for NCHW im2col in
// ResNet-50); its Winograd form is in tensor_winograd.cc.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tensor/tensor.h"
#include "engine/tensor/tensor_internal.h"

namespace kiln {

namespace {
constexpr int64_t kB = Tensor::kChannelBlock;

bool Blockable(int64_t channels) { return channels > 0 && channels % kB == 0; }
int64_t Blocks(int64_t channels) { return (channels + kB - 1) / kB; }

// The float32 weight `w` laid out on the host into a new zero-filled
// tensor of shape `out`: place(src, dst) writes each weight where it goes.
template <typename Place>
Tensor LaidOut(const Tensor& w, const Shape& out, const Place& place) {
  Tensor copy = w, laid_out;
  absl::Status read = copy.ReadHost([&](const void* src) {
    laid_out = Tensor::FromFill(w.engine(), out, w.dtype(), w.device(), [&](void* dst) {
      float* p = static_cast<float*>(dst);
      std::fill(p, p + kiln::Prod(out), 0.0f);
      place(static_cast<const float*>(src), p);
    });
  });
  if (!read.ok()) return TensorInternal::ErrorLike(w, read);
  return laid_out;
}

// OK when `w` is a float32 2-D convolution weight (Cout, Cin, kh, kw).
absl::Status CheckConvWeight(const Tensor& w) {
  if (w.dtype() == dtypes::kFloat32 && w.ndim() == 4 && kiln::Prod(w.shape()) >= 1)
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("channel blocks: weight ", ShapeStr(w.shape()), " of ",
                                                 w.dtype().Name(),
                                                 " is not a float32 2-D convolution weight"));
}

// The 2-D windows of a blocked input x, (N, CB, OH, OW, 16, kh, kw).
Tensor BlockedWindows(const Tensor& x, const std::vector<int64_t>& kernel,
                      const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                      const Pads& padding) {
  if (x.ndim() != 5 || x.shape()[4] != kB || kernel.size() != 2 || stride.size() != 2 ||
      dilation.size() != 2 || padding.size() != 2)
    return Fail(x, absl::StrCat("channel blocks: no 2-D windows of ", ShapeStr(x.shape())));
  // The block is a third window dim of one element: Pool pads and copies
  // in the blocked layout, so every tap is one whole vector.
  Pads pads = padding;
  pads.push_back({0, 0});
  Tensor win = x.Pool({kernel[0], kernel[1], 1}, {stride[0], stride[1], 1},
                      {dilation[0], dilation[1], 1}, pads);
  if (!win.ok()) return win;
  const Shape& s = win.shape();  // (N, CB, OH, OW, 16, kh, kw, 1)
  return win.Reshape({s[0], s[1], s[2], s[3], kB, s[5], s[6]});
}

}  // namespace

Tensor Tensor::ToChannelBlocks() const {
  if (!ok()) return *this;
  if (ndim() < 2 || !Blockable(shape()[1]))
    return Fail(*this, absl::StrCat("channel blocks: ", ShapeStr(shape()),
                                    " has no channels in multiples of ", kB));
  Shape split = {shape()[0], shape()[1] / kB, kB};
  split.insert(split.end(), shape().begin() + 2, shape().end());
  std::vector<int64_t> order = {0, 1};
  for (int64_t i = 3; i < ndim() + 1; ++i) order.push_back(i);
  order.push_back(2);
  return Reshape(split).Permute(order);
}

Tensor Tensor::FromChannelBlocks() const {
  if (!ok()) return *this;
  if (ndim() < 3 || shape().back() != kB)
    return Fail(*this, absl::StrCat("channel blocks: ", ShapeStr(shape()), " is not in blocks of ", kB));
  std::vector<int64_t> order = {0, 1, ndim() - 1};
  for (int64_t i = 2; i < ndim() - 1; ++i) order.push_back(i);
  Shape merged = {shape()[0], shape()[1] * kB};
  merged.insert(merged.end(), shape().begin() + 2, shape().end() - 1);
  return Permute(order).Reshape(merged);
}

// On the host, like the Winograd weights and the panels: a permuting copy
// as a device kernel would be one more kernel to compile per weight shape.
// Channels short of a whole block are zero weights: the lanes of a padded
// block (24 channels in 32) then add nothing to any output, and the padded
// output channels are 0.
Tensor Tensor::ChannelBlockedWeights() const {
  if (!ok()) return *this;
  const bool depthwise = ndim() == 4 && shape()[1] == 1;
  const bool pointwise = ndim() == 4 && shape()[2] == 1 && shape()[3] == 1;
  if (dtype() != dtypes::kFloat32 || !(depthwise || pointwise) || shape()[0] < 1 || shape()[1] < 1)
    return Fail(*this, absl::StrCat("channel blocks: weight ", ShapeStr(shape()), " of ",
                                    dtype().Name(), " is not a float32 1x1 or depthwise weight"));
  const int64_t cout = shape()[0], cin = shape()[1], kh = shape()[2], kw = shape()[3];
  const int64_t taps = kh * kw, cob = Blocks(cout), cb = Blocks(cin);
  const Shape out = depthwise ? Shape{cob, kh, kw, kB} : Shape{cob, cb, kB, kB};
  return LaidOut(*this, out, [&](const float* w, float* p) {
    for (int64_t o = 0; o < cout; ++o) {
      const int64_t ob = o / kB, oc = o % kB;
      if (depthwise) {  // (C, 1, kh, kw) -> (C / 16, kh, kw, c)
        for (int64_t t = 0; t < taps; ++t) p[static_cast<size_t>((ob * taps + t) * kB + oc)] = w[o * taps + t];
      } else {  // (Cout, Cin) -> (Cout / 16, Cin / 16, ci, co)
        for (int64_t i = 0; i < cin; ++i)
          p[static_cast<size_t>(((ob * cb + i / kB) * kB + i % kB) * kB + oc)] = w[o * cin + i];
      }
    }
  });
}

Tensor Tensor::PointwiseBlocked(const Tensor& wb, int64_t stride) const {
  if (!ok()) return *this;
  if (!wb.ok()) return wb;
  const Shape& ws = wb.shape();
  if (ndim() != 5 || shape()[4] != kB || wb.ndim() != 4 || ws[1] != shape()[1] || ws[2] != kB ||
      ws[3] != kB || stride < 1)
    return Fail(*this, absl::StrCat("channel blocks: input ", ShapeStr(shape()), " and weight ",
                                    ShapeStr(ws), " do not make a 1x1 convolution"));
  Tensor x = *this;
  if (stride > 1) {
    // Every stride-th pixel: a view (the kernel reads whole channel blocks).
    const int64_t oh = (shape()[2] - 1) / stride + 1, ow = (shape()[3] - 1) / stride + 1;
    const Shape& s = shape();
    x = AsStrided({s[0], s[1], oh, ow, kB},
                  {s[1] * s[2] * s[3] * kB, s[2] * s[3] * kB, stride * s[3] * kB, stride * kB, 1});
  }
  const int64_t n = x.shape()[0], cb = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  // (N, COB, CB, H, W, ci, co), summed over CB and ci.
  return (x.Reshape({n, 1, cb, h, w, kB, 1}) * wb.Reshape({1, ws[0], cb, 1, 1, kB, kB}))
      .Sum({2, 5});
}

Tensor Tensor::DepthwiseBlocked(const Tensor& wd, const std::vector<int64_t>& stride,
                                const std::vector<int64_t>& dilation, const Pads& padding) const {
  if (!ok()) return *this;
  if (!wd.ok()) return wd;
  const Shape& ws = wd.shape();
  if (ndim() != 5 || shape()[4] != kB || wd.ndim() != 4 || ws[0] != shape()[1] || ws[3] != kB ||
      stride.size() != 2 || dilation.size() != 2 || padding.size() != 2)
    return Fail(*this, absl::StrCat("channel blocks: input ", ShapeStr(shape()), " and weight ",
                                    ShapeStr(ws), " do not make a 2-D depthwise convolution"));
  Tensor win = BlockedWindows(*this, {ws[1], ws[2]}, stride, dilation, padding);
  if (!win.ok()) return win;
  // (N, CB, OH, OW, c, kh, kw) * (CB, kh, kw, c) summed over the taps.
  return (win * wd.Permute({0, 3, 1, 2}).Reshape({1, ws[0], 1, 1, kB, ws[1], ws[2]})).Sum({5, 6});
}

Tensor Tensor::DenseBlockedWeights() const {
  if (!ok()) return *this;
  if (absl::Status s = CheckConvWeight(*this); !s.ok()) return TensorInternal::ErrorLike(*this, s);
  const int64_t cout = shape()[0], cin = shape()[1], taps = shape()[2] * shape()[3];
  const int64_t cb = Blocks(cin);
  const Shape out = {Blocks(cout), cb, shape()[2], shape()[3], kB, kB};
  return LaidOut(*this, out, [&](const float* w, float* p) {
    // (Cout, Cin, kh, kw) -> (Cout / 16, Cin / 16, kh, kw, ci, co)
    for (int64_t o = 0; o < cout; ++o)
      for (int64_t i = 0; i < cin; ++i)
        for (int64_t t = 0; t < taps; ++t)
          p[static_cast<size_t>((((o / kB) * cb + i / kB) * taps + t) * kB * kB +
                                (i % kB) * kB + o % kB)] = w[(o * cin + i) * taps + t];
  });
}

Tensor Tensor::WinogradBlockedWeights() const {
  if (!ok()) return *this;
  if (dtype() != dtypes::kFloat32)
    return Fail(*this, absl::StrCat("channel blocks: weight of ", dtype().Name(), " is not float32"));
  Tensor u = WinogradWeights();  // (16, Cout, Cin)
  if (!u.ok()) return u;
  const int64_t planes = u.shape()[0], cout = u.shape()[1], cin = u.shape()[2];
  const int64_t cob = Blocks(cout), cb = Blocks(cin);
  return LaidOut(u, {planes, cob, cb, kB, kB}, [&](const float* w, float* p) {
    // (16, Cout, Cin) -> (16, Cout / 16, Cin / 16, ci, co)
    for (int64_t q = 0; q < planes; ++q)
      for (int64_t o = 0; o < cout; ++o)
        for (int64_t i = 0; i < cin; ++i)
          p[static_cast<size_t>((((q * cob + o / kB) * cb + i / kB) * kB + i % kB) * kB + o % kB)] =
              w[(q * cout + o) * cin + i];
  });
}

Tensor Tensor::ConvBlocked(const Tensor& wb, const std::vector<int64_t>& stride,
                           const std::vector<int64_t>& dilation, const Pads& padding) const {
  if (!ok()) return *this;
  if (!wb.ok()) return wb;
  const Shape& ws = wb.shape();
  if (ndim() != 5 || shape()[4] != kB || wb.ndim() != 6 || ws[1] != shape()[1] || ws[4] != kB ||
      ws[5] != kB)
    return Fail(*this, absl::StrCat("channel blocks: input ", ShapeStr(shape()), " and weight ",
                                    ShapeStr(ws), " do not make a 2-D convolution"));
  Tensor win = BlockedWindows(*this, {ws[2], ws[3]}, stride, dilation, padding);
  if (!win.ok()) return win;
  const Shape& v = win.shape();
  // (N, 1, CB, OH, OW, kh, kw, ci, 1) * (1, COB, CB, 1, 1, kh, kw, ci, co),
  // summed over CB, the taps and ci: each tap's input channels are one
  // whole vector, broadcast lane by lane against 16 output channels.
  Tensor x = win.Permute({0, 1, 2, 3, 5, 6, 4}).Reshape({v[0], 1, v[1], v[2], v[3], v[5], v[6], kB, 1});
  return (x * wb.Reshape({1, ws[0], ws[1], 1, 1, ws[2], ws[3], kB, kB})).Sum({2, 5, 6, 7});
}

Tensor Tensor::StemBlockedWeights() const {
  if (!ok()) return *this;
  if (absl::Status s = CheckConvWeight(*this); !s.ok()) return TensorInternal::ErrorLike(*this, s);
  const int64_t cout = shape()[0], per = shape()[1] * shape()[2] * shape()[3];
  const Shape out = {Blocks(cout), shape()[1], shape()[2], shape()[3], kB};
  return LaidOut(*this, out, [&](const float* w, float* p) {
    for (int64_t o = 0; o < cout; ++o)  // (Cout, Cin * kh * kw) -> (Cout / 16, ..., co)
      for (int64_t i = 0; i < per; ++i)
        p[static_cast<size_t>(((o / kB) * per + i) * kB + o % kB)] = w[o * per + i];
  });
}

Tensor Tensor::ConvIntoBlocks(const Tensor& wb, const std::vector<int64_t>& stride,
                              const std::vector<int64_t>& dilation, const Pads& padding) const {
  if (!ok()) return *this;
  if (!wb.ok()) return wb;
  const Shape& ws = wb.shape();
  if (ndim() != 4 || wb.ndim() != 5 || ws[1] != shape()[1] || ws[4] != kB)
    return Fail(*this, absl::StrCat("channel blocks: input ", ShapeStr(shape()), " and weight ",
                                    ShapeStr(ws), " do not make a 2-D convolution"));
  // (N, Cin, OH, OW, kh, kw) -> (N, 1, OH, OW, 1, Cin, kh, kw); the weight
  // (COB, Cin, kh, kw, co) -> (1, COB, 1, 1, co, Cin, kh, kw); summed over
  // Cin and the taps: the output pixels' blocks, the input broadcast.
  Tensor win = Pool({ws[2], ws[3]}, stride, dilation, padding);
  if (!win.ok()) return win;
  const Shape& v = win.shape();
  Tensor x = win.Permute({0, 2, 3, 1, 4, 5}).Reshape({v[0], 1, v[2], v[3], 1, v[1], v[4], v[5]});
  Tensor w = wb.Permute({0, 4, 1, 2, 3}).Reshape({1, ws[0], 1, 1, kB, ws[1], ws[2], ws[3]});
  return (x * w).Sum({5, 6, 7});
}

}  // namespace kiln
