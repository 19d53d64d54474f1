#include <cmath>

#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

class BasicTest : public ::testing::TestWithParam<std::string> {
 protected:
  Engine* e = TestEngine();
  std::string dev = GetParam();
};

TEST_P(BasicTest, AddBroadcast) {
  Tensor a = Tensor::FromFloats(e, {1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  Tensor b = Tensor::FromFloats(e, {10, 20, 30}, {3}, dev);
  ExpectNear(Values(a + b), {11, 22, 33, 14, 25, 36});
  ExpectNear(Values(a * 2.0 - 1.0), {1, 3, 5, 7, 9, 11});
}

TEST_P(BasicTest, ReduceAndMovement) {
  Tensor a = Tensor::FromFloats(e, {1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  ExpectNear(Values(a.Sum({1})), {6, 15});
  ExpectNear(Values(a.Sum({0})), {5, 7, 9});
  ExpectNear(Values(a.Max()), {6});
  ExpectNear(Values(a.Transpose()), {1, 4, 2, 5, 3, 6});
  ExpectNear(Values(a.Pad({{0, 0}, {1, 1}}, 0)), {0, 1, 2, 3, 0, 0, 4, 5, 6, 0});
  ExpectNear(Values(a.Exp().Pad({{0, 0}, {1, 0}})),
             {0, std::exp(1.), std::exp(2.), std::exp(3.), 0, std::exp(4.), std::exp(5.), std::exp(6.)},
             1e-4, 1e-5);
}

TEST_P(BasicTest, Matmul) {
  Tensor a = Tensor::FromFloats(e, {1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  Tensor b = Tensor::FromFloats(e, {1, 0, 0, 1, 1, 1}, {3, 2}, dev);
  ExpectNear(Values(a.Matmul(b)), {4, 5, 10, 11});
}

TEST_P(BasicTest, LargerMatmulMatchesNaive) {
  const int m = 33, k = 40, n = 48;
  std::vector<float> av(m * k), bv(k * n);
  for (int i = 0; i < m * k; ++i) av[i] = static_cast<float>((i * 7) % 13) - 6;
  for (int i = 0; i < k * n; ++i) bv[i] = static_cast<float>((i * 5) % 11) - 5;
  std::vector<double> want(m * n, 0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int x = 0; x < k; ++x) want[i * n + j] += av[i * k + x] * bv[x * n + j];
  Tensor a = Tensor::FromFloats(e, av, {m, k}, dev);
  Tensor b = Tensor::FromFloats(e, bv, {k, n}, dev);
  ExpectNear(Values(a.Matmul(b)), want);
}

TEST_P(BasicTest, Softmax) {
  Tensor a = Tensor::FromFloats(e, {1, 2, 3, 1, 1, 1}, {2, 3}, dev);
  double s = std::exp(1.) + std::exp(2.) + std::exp(3.);
  ExpectNear(Values(a.Softmax(-1)),
             {std::exp(1.) / s, std::exp(2.) / s, std::exp(3.) / s, 1. / 3, 1. / 3, 1. / 3});
}

INSTANTIATE_TEST_SUITE_P(Devices, BasicTest, ::testing::Values("CPU", "INTERP"));

}  // namespace
}  // namespace kiln
