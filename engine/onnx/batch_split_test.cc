#include "engine/onnx/batch_split.h"

#include <functional>

#include "engine/jit/jit.h"
#include "engine/onnx/test_builder.h"
#include "engine/runtime/cpu_device.h"
#include "engine/runtime/interpreter.h"
#include "engine/runtime/thread_pool.h"

namespace kiln {
namespace {

using namespace onnx_test;  // NOLINT: the test helpers

TEST(BatchSplitTest, SliceImagesIsTheLargestDivisorThatFits) {
  const double mib = kSliceBytes;
  EXPECT_EQ(SliceImages(8, mib / 8), 8);     // the whole batch fits
  EXPECT_EQ(SliceImages(8, mib / 4), 4);
  EXPECT_EQ(SliceImages(8, mib / 3), 2);     // 3 does not divide 8
  EXPECT_EQ(SliceImages(8, mib), 1);
  EXPECT_EQ(SliceImages(8, 10 * mib), 1);
  EXPECT_EQ(SliceImages(7, mib / 3), 1);     // prime: one image at a time
  EXPECT_EQ(SliceImages(1, 10 * mib), 1);
  EXPECT_EQ(SliceImages(6, 0), 6);           // nothing measured: whole
  // At most kMaxSlices slices (a graph build each).
  EXPECT_EQ(SliceImages(128, mib), 2);
  EXPECT_EQ(SliceImages(1000, mib), 20);     // 50 slices
  EXPECT_EQ(SliceImages(int64_t{1} << 40, mib), (int64_t{1} << 40) / 64);
  EXPECT_EQ(SliceImages(1009, mib), 1009);   // prime: no 2..64 slices
}

// Slices on the CPU device, one group per thread; the interpreter (and
// GPUs) take whole batches.
TEST(BatchSplitTest, PolicyByDevice) {
  CpuDevice::Options one, two;
  one.threads = 1;
  two.threads = 2;
  EXPECT_EQ(BatchSplitter::PolicyFor(CpuDevice(one)).off, "");
  EXPECT_EQ(BatchSplitter::PolicyFor(CpuDevice(one)).groups, 1);
  CpuDevice shared(two);
  EXPECT_EQ(BatchSplitter::PolicyFor(shared).off, "");
  EXPECT_EQ(BatchSplitter::PolicyFor(shared).groups, 2);
  EXPECT_NE(BatchSplitter::PolicyFor(InterpreterDevice()).off.find("INTERP is not the CPU device"),
            std::string::npos);
  // A thread whose launches run on a pool of one thread (a kilnd instance's
  // share of the cores) builds one group, whatever the device's own pool.
  ThreadPool mine(1);
  {
    ThreadPool::Scope scope(&mine);
    EXPECT_EQ(BatchSplitter::PolicyFor(shared).groups, 1);
  }
  EXPECT_EQ(BatchSplitter::PolicyFor(shared).groups, 2);
}

// Images of C x 128 x 128 floats: C = 16 is 1 MiB per image after the first
// node, past kSliceBytes, so a separable model is built one image at a time.
constexpr int64_t kC = 16, kH = 128, kW = 128;

Tensor Images(int64_t n) {
  std::vector<float> v(n * kC * kH * kW);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
  return F(v, {n, kC, kH, kW});
}

struct Case {
  std::string name;
  // Adds nodes reading "r" (Relu of the images, (N, 16, 128, 128)) and
  // writing "y".
  std::function<void(Builder&)> add;
  bool split;
  std::string reason;  // substring of the reason it is built whole
};

void Int64Init(Builder& b, const std::string& name, const std::vector<int64_t>& v) {
  b.Init(name, HostTensor::FromInt64s(v, {static_cast<int64_t>(v.size())}));
}

std::vector<Case> Cases() {
  return {
      {"global_pool_and_gemm",
       [](Builder& b) {
         b.Node("GlobalAveragePool", {"r"}, {"p"});
         b.Node("Flatten", {"p"}, {"f"});
         std::vector<double> w(kC * 3);
         for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>(i % 5) - 2;
         b.Init("w", HostTensor::FromDoubles(w, {kC, 3}, dtypes::kFloat32));
         b.Node("Gemm", {"f", "w"}, {"y"});
       },
       true, ""},
      {"reshape_from_shape",  // (N, -1) with N read from Shape(r): follows the slice
       [](Builder& b) {
         b.Node("Shape", {"r"}, {"s"});
         Int64Init(b, "i0", {0});
         b.Node("Gather", {"s", "i0"}, {"n"});
         Int64Init(b, "m1", {-1});
         AttrInt(b.Node("Concat", {"n", "m1"}, {"t"}), "axis", 0);
         b.Node("Reshape", {"r", "t"}, {"y"});
       },
       true, ""},
      {"reduce_over_images",
       [](Builder& b) { AttrInts(b.Node("ReduceMean", {"r"}, {"y"}), "axes", {0}); },
       false, "(ReduceMean) mixes the images"},
      {"softmax_over_images",
       [](Builder& b) { AttrInt(b.Node("Softmax", {"r"}, {"y"}), "axis", 0); },
       false, "(Softmax) mixes the images"},
      {"transpose_of_the_batch",
       [](Builder& b) { AttrInts(b.Node("Transpose", {"r"}, {"y"}), "perm", {1, 0, 2, 3}); },
       false, "(Transpose) mixes the images"},
      {"concat_of_images",
       [](Builder& b) { AttrInt(b.Node("Concat", {"r", "r"}, {"y"}), "axis", 0); },
       false, "(Concat) mixes the images"},
      {"slice_of_images",
       [](Builder& b) {
         Int64Init(b, "st", {1});
         Int64Init(b, "en", {1000});
         Int64Init(b, "ax", {0});
         b.Node("Slice", {"r", "st", "en", "ax"}, {"y"});
       },
       false, "(Slice) mixes the images"},
      {"batch_size_as_data",  // r * N: N comes from the batch size
       [](Builder& b) {
         b.Node("Shape", {"r"}, {"s"});
         Int64Init(b, "i0", {0});
         b.Node("Gather", {"s", "i0"}, {"n"});
         AttrInt(b.Node("Cast", {"n"}, {"nf"}), "to", TensorProto::FLOAT);
         b.Node("Mul", {"r", "nf"}, {"y"});
       },
       false, "(Mul) mixes the images"},
      {"constant_reshape_target",  // (2, -1) is the batch of 2, not of a slice
       [](Builder& b) {
         Int64Init(b, "t", {2, -1});
         b.Node("Reshape", {"r", "t"}, {"y"});
       },
       false, "builds otherwise"},
      {"per_image_constant",  // a constant of one row per image (2, ...)
       [](Builder& b) {
         b.Init("c", HostTensor::FromDoubles({1, 2}, {2, 1, 1, 1}, dtypes::kFloat32));
         b.Node("Add", {"r", "c"}, {"y"});
       },
       false, "(Add) mixes the images"},
      {"unknown_operator_on_images",
       [](Builder& b) {
         Int64Init(b, "k", {3});
         b.Node("TopK", {"r", "k"}, {"y", "idx"});
         // TopK along the last axis is per image; CumSum has no rule.
         b.Node("CumSum", {"r", "k"}, {"unused"});
       },
       false, "(CumSum) mixes the images"},
      {"random_draw",  // one draw for the batch, broadcast to every image
       [](Builder& b) {
         AttrInts(b.Node("RandomNormal", {}, {"noise"}), "shape", {kW});
         b.Node("Add", {"r", "noise"}, {"y"});
       },
       false, "(RandomNormal) mixes the images"},
      {"inference_dropout",  // training_mode false: the identity, per image
       [](Builder& b) {
         b.Init("ratio", HostTensor::FromDoubles({0.5}, {}, dtypes::kFloat32));
         b.Init("train", HostTensor::FromInt64s({0}, {}, dtypes::kBool));
         b.Node("Dropout", {"r", "ratio", "train"}, {"y"});
       },
       true, ""},
      {"output_not_per_image",  // the batch's shape, as floats
       [](Builder& b) {
         b.Node("Shape", {"r"}, {"s"});
         AttrInt(b.Node("Cast", {"s"}, {"y"}), "to", TensorProto::FLOAT);
       },
       false, "graph output 'y' is not computed per image"},
  };
}

// Builds each case at batch 2 and checks how it was built and that every
// image's output is that image's own output at batch 1 (or, for models that
// mix images, that the whole batch was used).
TEST(BatchSplitTest, SplitsOnlyModelsThatComputeImageByImage) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    Builder b;
    b.Input("x", TensorProto::FLOAT, {-1, kC, kH, kW});
    b.Node("Relu", {"x"}, {"r"});
    c.add(b);
    b.Output("y");
    auto m = Load(b);
    ASSERT_TRUE(m);
    const Tensor x = Images(2);
    absl::StatusOr<std::vector<Tensor>> out = m->Run({x});
    ASSERT_TRUE(out.ok()) << out.status();
    std::optional<BatchSplitter::Choice> choice = m->BatchChoice({x});
    ASSERT_TRUE(choice.has_value());
    EXPECT_EQ(choice->batch, 2);
    if (!c.split) {
      EXPECT_EQ(choice->images, 2);
      EXPECT_NE(choice->reason.find(c.reason), std::string::npos) << choice->reason;
      continue;
    }
    EXPECT_EQ(choice->images, 1) << choice->reason;
    // A second run takes the recorded choice; each image as at batch 1.
    out = m->Run({x});
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<double> both = Values((*out)[0]);
    ASSERT_EQ(both.size() % 2, 0u);
    const size_t half = both.size() / 2;
    for (int64_t i = 0; i < 2; ++i) {
      Pads bounds = {{i, i + 1}, {0, kC}, {0, kH}, {0, kW}};
      const std::vector<double> one = RunOne(*m, {x.Shrink(bounds)});
      ASSERT_EQ(one.size(), half);
      for (size_t j = 0; j < half; ++j) ASSERT_EQ(both[i * half + j], one[j]) << j;
    }
  }
}

// On 2 threads the slices are built in 2 groups, each realized on its own:
// a JIT replay runs them side by side (engine/jit/parallel.h), and every
// image is still its own batch-1 output, bit for bit.
TEST(BatchSplitTest, GroupsOfSlicesOnTwoThreads) {
  ThreadPool two(2);
  ThreadPool::Scope scope(&two);
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, kC, kH, kW});
  b.Node("Relu", {"x"}, {"r"});
  Cases()[0].add(b);  // global pool and Gemm
  b.Output("y");
  auto m = Load(b);
  ASSERT_TRUE(m);
  const Tensor x = Images(4);
  Jit jit([&m](const std::vector<Tensor>& in) { return m->Run(in); });
  std::vector<double> first;
  for (int call = 0; call < 4; ++call) {  // plain, capture, replays
    auto out = jit({x});
    ASSERT_TRUE(out.ok()) << out.status();
    if (call == 0) first = Values((*out)[0]);
    else EXPECT_EQ(Values((*out)[0]), first) << call;
  }
  EXPECT_EQ(jit.stats().replays, 2u);
  EXPECT_EQ(jit.stats().parallel_replays, 2u);
  std::optional<BatchSplitter::Choice> c = m->BatchChoice({x});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->images, 1);
  EXPECT_EQ(c->groups, 2);
  const size_t per = first.size() / 4;
  for (int64_t i = 0; i < 4; ++i) {
    const std::vector<double> one = RunOne(*m, {x.Shrink({{i, i + 1}, {0, kC}, {0, kH}, {0, kW}})});
    ASSERT_EQ(one.size(), per);
    for (size_t j = 0; j < per; ++j) ASSERT_EQ(first[i * per + j], one[j]) << i << " " << j;
  }
  // Where slices do not pay for the cache (the weights the extra slices
  // would read again outweigh the intermediates), a batch is still built in
  // one group of its images per thread, each reading the weights on its own
  // core: x (N, 65536) by a 4 MiB weight. A batch whose intermediates fit
  // the cache (N = 2: 0.5 MiB) stays whole, and so does an odd batch.
  Builder heavy;
  heavy.Input("x", TensorProto::FLOAT, {-1, 1 << 16});
  heavy.Node("Relu", {"x"}, {"r"});
  std::vector<double> w((1 << 16) * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>(i % 7) - 3;
  heavy.Init("w", HostTensor::FromDoubles(w, {1 << 16, 16}, dtypes::kFloat32));
  heavy.Node("MatMul", {"r", "w"}, {"y"});
  heavy.Output("y");
  auto h = Load(heavy);
  ASSERT_TRUE(h);
  auto rows = [](int64_t n) {
    std::vector<float> v(n << 16);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 13 % 17) / 8.0 - 1.0);
    return F(v, {n, 1 << 16});
  };
  for (int64_t n : {8, 2, 3}) {
    SCOPED_TRACE(n);
    const Tensor xs = rows(n);
    const std::vector<double> all = RunOne(*h, {xs});
    c = h->BatchChoice({xs});
    ASSERT_TRUE(c.has_value());
    if (n == 8) {
      EXPECT_EQ(c->images, 4) << c->reason;
      EXPECT_EQ(c->groups, 2);
    } else {
      EXPECT_EQ(c->images, n);
    }
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<double> one = RunOne(*h, {xs.Shrink({{i, i + 1}, {0, 1 << 16}})});
      for (size_t j = 0; j < 16; ++j) ASSERT_EQ(all[i * 16 + j], one[j]) << i << " " << j;
    }
  }
}

// A batch whose intermediates fit the cache is built whole, and a batch of
// inputs of two sizes along axis 0 is no batch.
TEST(BatchSplitTest, SmallBatchesAndMismatchedInputsAreBuiltWhole) {
  Builder b;
  b.Input("x", TensorProto::FLOAT, {-1, 4}).Input("z", TensorProto::FLOAT, {-1, 4});
  b.Node("Relu", {"x"}, {"r"});
  b.Node("Relu", {"z"}, {"q"});
  b.Output("r").Output("q");
  auto m = Load(b);
  ASSERT_TRUE(m);
  const Tensor x = F({1, -2, 3, -4, 5, -6, 7, -8}, {2, 4});
  ExpectNear(RunOne(*m, {x, x}), {1, 0, 3, 0, 5, 0, 7, 0});
  std::optional<BatchSplitter::Choice> c = m->BatchChoice({x, x});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->images, 2);
  EXPECT_NE(c->reason.find("fit"), std::string::npos) << c->reason;
  const Tensor three = F({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4});
  ExpectNear(RunOne(*m, {x, three}, 1), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_FALSE(m->BatchChoice({x, three}).has_value());
}

// The choices are kept for at most kMaxChoices signatures: ever new batch
// shapes do not grow them without bound, and an evicted one is made again.
TEST(BatchSplitTest, ChoicesAreBounded) {
  BatchSplitter splitter({"x"}, {true}, {"y"}, [] { return BatchSplitter::Policy{}; });
  int builds = 0;
  auto build = [&](const std::vector<OnnxValue>& in, BatchTracker*) {
    ++builds;
    return absl::StatusOr<std::vector<OnnxValue>>(std::vector<OnnxValue>{in[0]});
  };
  auto input = [](int64_t n, int64_t w) {
    return std::vector<OnnxValue>{OnnxValue::FromTensor(F(std::vector<float>(n * w, 1), {n, w}))};
  };
  for (int64_t w = 1; w <= static_cast<int64_t>(kMaxChoices) + 10; ++w) {
    ASSERT_TRUE(splitter.Run(input(2, w), build).ok());
    ASSERT_TRUE(splitter.ChoiceFor(input(2, w)).has_value());
  }
  EXPECT_EQ(builds, static_cast<int>(kMaxChoices) + 10);  // one build each: whole
  int kept = 0;
  for (int64_t w = 1; w <= static_cast<int64_t>(kMaxChoices) + 10; ++w)
    kept += splitter.ChoiceFor(input(2, w)).has_value();
  EXPECT_EQ(kept, static_cast<int>(kMaxChoices));
  // No tracker verdict needed for a batch whose outputs are the inputs: a
  // Build that observes nothing leaves "y" constant, so it is built whole.
  const int64_t last = static_cast<int64_t>(kMaxChoices) + 10;
  EXPECT_NE(splitter.ChoiceFor(input(2, last)).value_or(BatchSplitter::Choice{}).reason.find("'y'"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
