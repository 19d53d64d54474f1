// Tensor: kiln's lazy tensor (tinygrad style).
//
// A Tensor is a handle (copies share state) to a node of the lazy tensor
// graph plus its shape, dtype, device and engine. Operations build graph
// nodes and compute nothing; Realize() (or reading the data) schedules,
// compiles and runs the kernels. Composite ops (softmax, conv2d, ...) are
// built from a small set of primitives: elementwise ALU ops, casts,
// reductions (sum / max / prod) and zero-copy movement ops.
//
// Errors never crash: an invalid op (mismatched shapes, bad axis...) yields
// a Tensor in an error state that propagates to its users; status(),
// Realize() and the data accessors report the first error.
//
// Thread safety: a Tensor may be used from one thread at a time; distinct
// tensors (even sharing inputs) may be used concurrently.
#ifndef KILN_ENGINE_TENSOR_TENSOR_H_
#define KILN_ENGINE_TENSOR_TENSOR_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/base/dtype.h"
#include "engine/realize/engine.h"
#include "engine/shape/shape_tracker.h"
#include "engine/shape/view.h"
#include "engine/uop/uop.h"

namespace kiln {

using Pads = std::vector<std::pair<int64_t, int64_t>>;

// A 2-D float32 Matmul with K at least this long (and M, N >= 32) reduces K
// in chunks (split-K, tensor_math.cc); the importer's weight pre-packing
// (engine/onnx/prepack.*) applies to the same Ks.
inline constexpr int64_t kMatmulSplitKMin = 4096;

class Tensor {
 public:
  Tensor();  // an error tensor ("uninitialized tensor")

  // ---------------- construction ----------------
  // Copies `nbytes` of host data (row-major) into a new buffer.
  static Tensor FromData(Engine* e, const void* data, size_t nbytes, Shape shape, DType dtype,
                         const std::string& device = "CPU");
  // A new buffer whose bytes `fill` writes, every one of them: into the
  // device's memory itself when it is host memory (no staging copy, no
  // zeroing), else into a staging block copied in.
  static Tensor FromFill(Engine* e, Shape shape, DType dtype, const std::string& device,
                         const std::function<void(void* dst)>& fill);
  template <typename T>
  static Tensor FromVector(Engine* e, const std::vector<T>& v, Shape shape, DType dtype,
                           const std::string& device = "CPU") {
    return FromData(e, v.data(), v.size() * sizeof(T), std::move(shape), dtype, device);
  }
  static Tensor FromFloats(Engine* e, const std::vector<float>& v, Shape shape,
                           const std::string& device = "CPU") {
    return FromVector(e, v, std::move(shape), dtypes::kFloat32, device);
  }
  // Wraps an existing device buffer (at least numel * itemsize bytes).
  static Tensor FromBuffer(Engine* e, BufferRef buffer, Shape shape, DType dtype,
                           const std::string& device);
  // Uninitialized storage.
  static Tensor Empty(Engine* e, Shape shape, DType dtype, const std::string& device = "CPU");
  static Tensor Full(Engine* e, Shape shape, ConstValue value, DType dtype,
                     const std::string& device = "CPU");
  static Tensor Zeros(Engine* e, Shape shape, DType dtype = dtypes::kFloat32,
                      const std::string& device = "CPU");
  static Tensor Ones(Engine* e, Shape shape, DType dtype = dtypes::kFloat32,
                     const std::string& device = "CPU");
  // [start, stop) by step.
  static Tensor Arange(Engine* e, double start, double stop, double step = 1,
                       DType dtype = dtypes::kInt32, const std::string& device = "CPU");
  static Tensor Eye(Engine* e, int64_t n, DType dtype = dtypes::kFloat32,
                    const std::string& device = "CPU");
  // Uniform [0, 1) / standard normal, from a counter-based generator: the
  // same seed gives the same values, element i depends only on (seed, i).
  static Tensor Rand(Engine* e, Shape shape, uint64_t seed, DType dtype = dtypes::kFloat32,
                     const std::string& device = "CPU");
  static Tensor Randn(Engine* e, Shape shape, uint64_t seed, DType dtype = dtypes::kFloat32,
                      const std::string& device = "CPU");
  // A tensor of the same engine / device.
  Tensor Const(ConstValue v, DType dtype) const;  // scalar (shape {})
  Tensor FullLike(ConstValue v) const;
  Tensor ZerosLike() const { return FullLike(int64_t{0}); }
  Tensor OnesLike() const { return FullLike(int64_t{1}); }

  // ---------------- properties ----------------
  const absl::Status& status() const;
  bool ok() const { return status().ok(); }
  const Shape& shape() const;
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t dim(int axis) const;  // negative axes count from the end
  int64_t numel() const;
  DType dtype() const;
  const std::string& device() const;
  Engine* engine() const;
  const UOpRef& uop() const;

  // ---------------- realization ----------------
  absl::Status Realize();
  // Writes `value` (same shape and dtype) into this tensor's memory, now:
  // this must be a view of a realized buffer without padding (a whole
  // buffer, a slice, a ShrinkAt row). Every tensor viewing that buffer sees
  // the new data. A value that reads the buffer itself is computed first
  // unless it reads each element exactly where it is written.
  absl::Status Assign(const Tensor& value);
  // Realizes this and `others` together (one schedule).
  static absl::Status RealizeAll(std::vector<Tensor*> tensors);
  // Row-major bytes of the data.
  absl::StatusOr<std::vector<uint8_t>> ToBytes();
  // The same into `dst`, which holds exactly nbytes() bytes.
  absl::Status CopyBytesTo(void* dst, size_t nbytes);
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype().ItemSize(); }
  template <typename T>
  absl::StatusOr<std::vector<T>> ToVector() {
    if (!ok()) return status();
    if (dtype().ItemSize() != static_cast<int>(sizeof(T)))
      return absl::InvalidArgumentError("ToVector: element size mismatch");
    std::vector<T> v(nbytes() / sizeof(T));  // copied into once, no byte vector between
    absl::Status s = CopyBytesTo(v.data(), v.size() * sizeof(T));
    if (!s.ok()) return s;
    return v;
  }
  // Calls `read` with the tensor's bytes (realized, row-major): the
  // device's memory itself when it is host memory, else a host copy (also
  // inside a JIT capture, which records what the host read).
  absl::Status ReadHost(const std::function<void(const void* src)>& read);
  // Values converted to double (any dtype).
  absl::StatusOr<std::vector<double>> ToDoubles();
  // The realized device buffer (realizes first; contiguous).
  absl::StatusOr<BufferRef> Buffer();

  // ---------------- elementwise (broadcasting) ----------------
  Tensor operator-() const { return Neg(); }
  Tensor Neg() const;
  Tensor Exp() const;
  Tensor Exp2() const;
  Tensor Log() const;
  Tensor Log2() const;
  Tensor Sqrt() const;
  Tensor Rsqrt() const;
  Tensor Sin() const;
  Tensor Cos() const;
  Tensor Tan() const;
  Tensor Tanh() const;
  Tensor Sigmoid() const;
  Tensor Relu() const;
  Tensor LeakyRelu(double alpha = 0.01) const;
  Tensor Elu(double alpha = 1.0) const;
  Tensor Gelu() const;        // exact (erf) form
  Tensor GeluTanh() const;    // tanh approximation
  Tensor Erf() const;
  Tensor HardSigmoid(double alpha = 1.0 / 6, double beta = 0.5) const;
  Tensor HardSwish() const;
  Tensor Softplus() const;
  Tensor Abs() const;
  Tensor Sign() const;
  Tensor Floor() const;
  Tensor Ceil() const;
  Tensor Round() const;  // half to even
  Tensor Trunc() const;
  Tensor Reciprocal() const;
  Tensor Square() const { return Mul(*this); }
  Tensor Clip(std::optional<double> lo, std::optional<double> hi) const;
  Tensor LogicalNot() const;
  Tensor BitwiseNot() const;
  Tensor IsNan() const;
  Tensor IsInf(bool pos = true, bool neg = true) const;

  Tensor Add(const Tensor& o) const;
  Tensor Sub(const Tensor& o) const;
  Tensor Mul(const Tensor& o) const;
  Tensor Div(const Tensor& o) const;       // true division for floats, truncation for ints
  Tensor FloorDiv(const Tensor& o) const;  // floor division
  Tensor Mod(const Tensor& o) const;       // Python-style (sign of the divisor)
  Tensor Fmod(const Tensor& o) const;      // C-style (sign of the dividend)
  Tensor Pow(const Tensor& o) const;
  Tensor Maximum(const Tensor& o) const;
  Tensor Minimum(const Tensor& o) const;
  Tensor Lt(const Tensor& o) const;
  Tensor Le(const Tensor& o) const;
  Tensor Gt(const Tensor& o) const;
  Tensor Ge(const Tensor& o) const;
  Tensor Eq(const Tensor& o) const;
  Tensor Ne(const Tensor& o) const;
  Tensor LogicalAnd(const Tensor& o) const;
  Tensor LogicalOr(const Tensor& o) const;
  Tensor LogicalXor(const Tensor& o) const;
  Tensor BitwiseAnd(const Tensor& o) const;
  Tensor BitwiseOr(const Tensor& o) const;
  Tensor BitwiseXor(const Tensor& o) const;
  Tensor ShiftLeft(const Tensor& o) const;
  Tensor ShiftRight(const Tensor& o) const;
  // cond ? a : b (cond is cast to bool).
  static Tensor Where(const Tensor& cond, const Tensor& a, const Tensor& b);

  Tensor operator+(const Tensor& o) const { return Add(o); }
  Tensor operator-(const Tensor& o) const { return Sub(o); }
  Tensor operator*(const Tensor& o) const { return Mul(o); }
  Tensor operator/(const Tensor& o) const { return Div(o); }
  Tensor operator+(double v) const { return Add(Scalar(v)); }
  Tensor operator-(double v) const { return Sub(Scalar(v)); }
  Tensor operator*(double v) const { return Mul(Scalar(v)); }
  Tensor operator/(double v) const { return Div(Scalar(v)); }
  // A scalar constant of this tensor's dtype.
  Tensor Scalar(double v) const;

  Tensor Cast(DType dtype) const;
  Tensor Bitcast(DType dtype) const;
  Tensor Contiguous() const;
  // Whether this is a buffer or a CONTIGUOUS, or a view of one: reading it
  // computes nothing (a view of a CONTIGUOUS is one of its buffer).
  bool Stored() const;

  // ---------------- reductions (axes may be negative; empty = all) ----------------
  Tensor Sum(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor Prod(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor Max(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor Min(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor Mean(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor Var(std::vector<int64_t> axes = {}, bool keepdim = false, int64_t correction = 1) const;
  Tensor Std(std::vector<int64_t> axes = {}, bool keepdim = false, int64_t correction = 1) const;
  // Index of the first max / min along `axis` (int64).
  Tensor Argmax(int64_t axis, bool keepdim = false, bool select_last = false) const;
  Tensor Argmin(int64_t axis, bool keepdim = false, bool select_last = false) const;
  Tensor LogSumExp(std::vector<int64_t> axes, bool keepdim = false) const;
  Tensor Cumsum(int64_t axis) const;

  // ---------------- movement (zero-copy) ----------------
  Tensor Reshape(Shape shape) const;  // one dim may be -1
  Tensor Permute(std::vector<int64_t> order) const;
  Tensor Expand(Shape shape) const;    // -1 keeps a dim; may prepend dims
  // True when this is a view that repeats its values along every axis of
  // `axes` (an Expand: stride 0, unmasked), so any one slice along them
  // holds all its values. False when unknown (a computed value).
  bool RepeatsAlong(const std::vector<int64_t>& axes) const;
  Tensor Pad(const Pads& pads, double value = 0) const;  // negative pads shrink
  Tensor Shrink(const Pads& bounds) const;
  // `size` elements of dim `axis` from the symbolic index `start` on: an
  // integer expression of bound variables (UOp::Bind(UOp::Variable(...), v))
  // whose bounds keep it inside the dim. Kernels reading or writing through
  // it take the variables as arguments, so one kernel serves every value
  // (an unrolled recurrence reads step t of a buffer this way).
  Tensor ShrinkAt(int64_t axis, const UOpRef& start, int64_t size) const;
  Tensor Flip(std::vector<int64_t> axes) const;
  // Python-style slice per axis: start, stop, step (step != 0).
  struct Slice {
    std::optional<int64_t> start, stop;
    int64_t step = 1;
  };
  Tensor Slices(const std::vector<Slice>& slices) const;
  Tensor Squeeze(std::vector<int64_t> axes = {}) const;
  Tensor Unsqueeze(int64_t axis) const;
  Tensor Transpose(int64_t a = -2, int64_t b = -1) const;
  Tensor Flatten(int64_t start = 0, int64_t end = -1) const;
  // A strided window onto the flattened tensor (like numpy as_strided).
  Tensor AsStrided(Shape shape, std::vector<int64_t> strides, int64_t offset = 0) const;
  static Tensor Cat(const std::vector<Tensor>& ts, int64_t axis);
  static Tensor Stack(const std::vector<Tensor>& ts, int64_t axis);
  std::vector<Tensor> Split(const std::vector<int64_t>& sizes, int64_t axis) const;
  // f over slices of the batch (dim 0) of equal size, the largest divisor
  // of the batch that is at most `per` images, concatenated along dim 0
  // (f(*this) when `per` covers the batch). The scheduler orders each
  // slice's kernels together and computes each slice straight into its part
  // of the result, so a pipeline whose intermediates grow with the batch
  // (im2col's windows, Winograd's transformed planes) keeps them one slice
  // big, in cache, and reuses their buffers from slice to slice. At most 64
  // slices: past that (a huge batch, a prime one with small slices) f runs
  // on the whole batch.
  Tensor ChunkBatch(int64_t per, const std::function<Tensor(const Tensor&)>& f) const;
  Tensor Repeat(const std::vector<int64_t>& repeats) const;  // tile
  // out[..., i, ...] = self[..., index[..., i, ...], ...] along `axis`.
  Tensor Gather(int64_t axis, const Tensor& index) const;
  // Take slices along `axis` (numpy take / ONNX Gather).
  Tensor IndexSelect(int64_t axis, const Tensor& index) const;
  // The indexed-load primitive under Gather and IndexSelect: out[o] =
  // x[.., idx[o] at `axis`, ..] with the other coordinates taken from o:
  // input dim d (d != axis) is output dim dims[d], of the same size. idx is
  // an integer tensor in the output's shape; an index outside
  // [0, x.dim(axis)) reads 0 (never outside x). O(output) work.
  static Tensor GatherLoad(const Tensor& x, int64_t axis, const Tensor& idx,
                           const std::vector<int64_t>& dims);

  // ---------------- linear algebra and nn ----------------
  Tensor Matmul(const Tensor& o) const;  // numpy matmul (batched, broadcasting)
  Tensor Linear(const Tensor& w, const Tensor* bias = nullptr) const;  // x @ w.T + b
  Tensor Softmax(int64_t axis = -1) const;
  Tensor LogSoftmax(int64_t axis = -1) const;
  Tensor LayerNorm(std::vector<int64_t> axes, double eps = 1e-5) const;
  // Inference batch norm over channel axis 1.
  Tensor BatchNorm(const Tensor& scale, const Tensor& bias, const Tensor& mean,
                   const Tensor& var, double eps = 1e-5) const;

  // How a convolution reads its windows: in place (direct), or copied out
  // first with the output pixels contiguous (im2col, a matmul over
  // Cin * kernel). kAuto chooses from the shapes (tensor_nn.cc, Im2Col).
  enum class ConvAlgo { kAuto, kDirect, kIm2Col };
  struct ConvOptions {
    std::vector<int64_t> stride;    // default 1
    std::vector<int64_t> dilation;  // default 1
    Pads padding;                   // per spatial dim (before, after); default 0
    int64_t groups = 1;
    ConvAlgo algo = ConvAlgo::kAuto;
  };
  // x (N, Cin, *spatial), w (Cout, Cin/groups, *kernel): 1-D, 2-D (any rank).
  Tensor Conv(const Tensor& w, const Tensor* bias, const ConvOptions& o) const;
  // The taps of a convolution of x by w that read something besides padding
  // for some output, when others read only padding (Conv drops those):
  // the bounds of the weight and the input to keep (Shrink), the kept
  // kernel and the padding left. Nothing when every tap is live.
  struct LiveTaps {
    Pads weight, input;
    std::vector<int64_t> kernel;
    Pads padding;
  };
  static std::optional<LiveTaps> DeadTaps(const Shape& x, const Shape& w, const ConvOptions& o);
  // The fraction of a convolution's (output, tap) products that read
  // padding (0 when the shapes or options are invalid). Past 1/2, Conv
  // drops the dead taps and splits the output into regions of the taps
  // they read (tensor_conv.cc).
  static double PaddingTapFraction(const Shape& x, const Shape& w, const ConvOptions& o);
  Tensor Conv2d(const Tensor& w, const Tensor* bias, const ConvOptions& o) const {
    return Conv(w, bias, o);
  }
  // Winograd F(2 x 2, 3 x 3) (tensor_winograd.cc): the weight (Cout, Cin,
  // 3, 3) transformed to (16, Cout, Cin), and the convolution of this
  // (N, Cin, H, W) with such weights, stride 1.
  Tensor WinogradWeights() const;
  Tensor ConvWinograd(const Tensor& u, const Pads& padding) const;
  // Whether a convolution of an input of shape `x` with a weight of shape
  // `w` runs faster as ConvWinograd on a CPU (the rule and its
  // measurements: tensor_winograd.cc).
  static bool WinogradPays(const Shape& x, const Shape& w, const ConvOptions& o);
  // Channel blocks (tensor_blocked.cc): (N, C, *spatial) seen as (N, C / 16,
  // *spatial, 16) and back (views; C a multiple of kChannelBlock); a 1x1
  // weight (Cout, Cin, 1, 1) laid out (Cout / 16, Cin / 16, ci, co) or a
  // depthwise one (C, 1, kh, kw) as (C / 16, kh, kw, c), float32, on the
  // host, channel counts rounded up to whole blocks with zero weights; and
  // the 1x1 and 2-D depthwise convolutions of blocked inputs with such
  // weights, blocked outputs (no bias).
  static constexpr int64_t kChannelBlock = 16;
  Tensor ToChannelBlocks() const;
  Tensor FromChannelBlocks() const;
  Tensor ChannelBlockedWeights() const;
  Tensor PointwiseBlocked(const Tensor& wb, int64_t stride) const;
  Tensor DepthwiseBlocked(const Tensor& wd, const std::vector<int64_t>& stride,
                          const std::vector<int64_t>& dilation, const Pads& padding) const;
  // A dense 2-D convolution weight (Cout, Cin, kh, kw) laid out (Cout / 16,
  // Cin / 16, kh, kw, ci, co), and its Winograd F(2 x 2, 3 x 3) transform
  // (WinogradWeights) as (16, Cout / 16, Cin / 16, ci, co), both float32 on
  // the host with zero weights for the channels short of whole blocks; and
  // the dense convolution of a blocked input with such weights, direct or
  // Winograd (tensor_winograd.cc), blocked output (no bias). A pool of a
  // blocked input is MaxPool / AvgPool with a third window dim of 1 over
  // the block.
  Tensor DenseBlockedWeights() const;
  Tensor WinogradBlockedWeights() const;
  Tensor ConvBlocked(const Tensor& wb, const std::vector<int64_t>& stride,
                     const std::vector<int64_t>& dilation, const Pads& padding) const;
  Tensor ConvWinogradBlocked(const Tensor& ub, const Pads& padding) const;
  // A 2-D convolution of this NCHW input (an image) into channel blocks:
  // the weight (Cout, Cin, kh, kw) laid out (Cout / 16, Cin, kh, kw, co)
  // (StemBlockedWeights, output channels padded with zero weights), the
  // output (N, Cout / 16, OH, OW, 16) (no bias).
  Tensor StemBlockedWeights() const;
  Tensor ConvIntoBlocks(const Tensor& wb, const std::vector<int64_t>& stride,
                        const std::vector<int64_t>& dilation, const Pads& padding) const;
  // A constant matmul weight in panels (tensor_panels.cc): this (K, N), or
  // (N, K) when `transposed`, float32, stored as (ceil(N / panel), K,
  // panel) with the last panel zero-padded; this (..., M, K) times such
  // panels, the first n columns: (..., M, n). PanelsPay: whether a CPU
  // matmul of m rows (all of A's rows) by a (K, N) weight, stored as (N, K)
  // when `transposed`, runs faster from kPanel-wide panels.
  static constexpr int64_t kPanel = 32;
  Tensor PanelWeights(int64_t panel, bool transposed) const;
  Tensor MatmulPanels(const Tensor& panels, int64_t n) const;
  static bool PanelsPay(int64_t m, int64_t k, int64_t n, bool transposed);
  static constexpr int64_t kPanelsFewRowsBytes = 1 << 20;
  // Whether a CPU matmul of `m` rows (M) times `b` (..., K, N) pays for
  // copying b into (K, N) rows first (b.Contiguous()): b is read across its
  // rows (one view, K adjacent in memory, N not: attention's K^T) and M is
  // at least 16 (tensor_math.cc).
  static bool TransposedCopyPays(int64_t m, const Tensor& b);
  // w (Cin, Cout/groups, *kernel); output_padding per spatial dim.
  Tensor ConvTranspose(const Tensor& w, const Tensor* bias, const ConvOptions& o,
                       const std::vector<int64_t>& output_padding = {}) const;

  struct PoolOptions {
    std::vector<int64_t> kernel;
    std::vector<int64_t> stride;    // default = kernel
    std::vector<int64_t> dilation;  // default 1
    Pads padding;
    bool ceil_mode = false;
    bool count_include_pad = false;  // avg pool
  };
  Tensor MaxPool(const PoolOptions& o) const;
  Tensor AvgPool(const PoolOptions& o) const;
  Tensor GlobalAvgPool() const;  // over all spatial dims (keepdim)
  Tensor GlobalMaxPool() const;

  // Sliding windows over the last k dims: (..., *out, *kernel); padding with
  // `pad_value`. Building block of conv and pooling. A padded or computed
  // input is first copied to a plain buffer (the scheduler computes it
  // straight into the padded buffer where it can), so the windows are one
  // affine view without masks.
  Tensor Pool(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
              const std::vector<int64_t>& dilation, const Pads& padding,
              double pad_value = 0) const;

  enum class ResizeMode { kNearest, kLinear };
  enum class CoordMode { kHalfPixel, kAsymmetric, kAlignCorners, kPytorchHalfPixel };
  enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
  // Resizes the trailing dims of `sizes` (same rank as the tensor).
  Tensor Resize(const Shape& sizes, ResizeMode mode,
                CoordMode coord = CoordMode::kHalfPixel,
                NearestMode nearest = NearestMode::kRoundPreferFloor) const;

  // Error tensor with `s` (for ops built outside this class).
  static Tensor Error(absl::Status s);

  struct State;  // internal (tensor_internal.h)

 private:
  explicit Tensor(std::shared_ptr<State> s) : s_(std::move(s)) {}
  Tensor Derive(UOpRef u, Shape shape, DType dtype) const;
  static Tensor FromError(const Tensor& like, absl::Status s);
  Tensor Elementwise(Op op, const std::vector<Tensor>& srcs, DType dtype) const;
  Tensor Binary(Op op, const Tensor& o, bool bool_result = false) const;
  // Binary for bitwise ops and shifts: integer or bool operands only.
  Tensor IntegerBinary(Op op, const Tensor& o, const char* name) const;
  // Applies `st`, a tracker over this tensor's shape, as a new view.
  Tensor View(const ShapeTracker& st) const;
  // Applies a movement op to this tensor's own tracker (keeps one view when
  // the op allows, unlike composing a fresh tracker).
  Tensor ViewOp(const std::function<ShapeTracker(const ShapeTracker&)>& op) const;
  Tensor Reduce(Op op, std::vector<int64_t> axes, bool keepdim) const;
  absl::StatusOr<std::vector<int64_t>> NormAxes(std::vector<int64_t> axes) const;
  friend struct TensorInternal;
  friend class Jit;

  std::shared_ptr<State> s_;
};

// Broadcasts shapes numpy-style; error if incompatible.
absl::StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);

}  // namespace kiln

#endif  // KILN_ENGINE_TENSOR_TENSOR_H_
