// A representative set of tensor ops for the GPU backends: elementwise ops
// of every dtype (float16 / bfloat16 included), casts and bitcasts,
// reductions, matmul, conv, pooling and movement, on sizes that exercise the
// GPU paths (blocks that do not divide the size, 2-D blocks, register
// tiles, merged grid dims). Used to check rendering + compilation
// (gpu_kernels_test) and execution against the interpreter
// (gpu_ops_test).
#ifndef KILN_TESTS_GPU_OP_CASES_H_
#define KILN_TESTS_GPU_OP_CASES_H_

#include <functional>
#include <string>
#include <vector>

#include "engine/tensor/tensor.h"

namespace kiln::gpu_test {

struct OpCase {
  std::string name;
  // Builds the output from inputs made on `device`.
  std::function<Tensor(Engine*, const std::string& device)> build;
  double atol = 1e-5, rtol = 1e-4;
};

// Deterministic values in [-2.75, 2.75] on a 1/4 grid (exact in float16 /
// bfloat16), made on `device` as float32 and cast to `dtype` (kept > 0 for
// `positive`).
inline Tensor Input(Engine* e, const std::string& device, Shape shape, DType dtype, int seed,
                    bool positive = false) {
  std::vector<float> v(Prod(shape));
  for (size_t i = 0; i < v.size(); ++i) {
    int k = static_cast<int>((i * 7 + seed * 13) % 23);
    v[i] = positive ? (k + 1) * 0.25f : (k - 11) * 0.25f;
    if (dtype.IsInt() || dtype.IsBool())
      v[i] = positive ? k + 1 : (dtype.IsUnsigned() ? k : k - 11);
  }
  Tensor t = Tensor::FromFloats(e, v, shape, device);
  return dtype == dtypes::kFloat32 ? t : t.Cast(dtype);
}

inline double Tol(DType t) {
  if (t.scalar == ScalarType::kFloat16) return 4e-3;
  if (t.scalar == ScalarType::kBFloat16) return 2e-2;
  return 1e-4;
}

inline std::vector<OpCase> OpCases() {
  std::vector<OpCase> cases;
  auto add = [&](std::string name, std::function<Tensor(Engine*, const std::string&)> f,
                 double tol = 1e-4) {
    cases.push_back({std::move(name), std::move(f), tol, tol});
  };
  int n = 0;
  const DType* all = AllDTypes(&n);
  for (int i = 0; i < n; ++i) {
    const DType dt = all[i];
    const std::string d = dt.Name();
    const double tol = Tol(dt);
    // 3 x 333: the inner axis has no good block divisor (padded, guarded).
    add(
        "add_" + d,
        [dt](Engine* e, const std::string& dev) {
          return Input(e, dev, {3, 333}, dt, 1) + Input(e, dev, {3, 333}, dt, 2);
        },
        tol);
    add(
        "mul_max_" + d,
        [dt](Engine* e, const std::string& dev) {
          Tensor a = Input(e, dev, {7, 40}, dt, 3), b = Input(e, dev, {40}, dt, 4);
          return (a * b).Maximum(a);
        },
        tol);
    add(
        "where_lt_" + d,
        [dt](Engine* e, const std::string& dev) {
          Tensor a = Input(e, dev, {5, 64}, dt, 5), b = Input(e, dev, {5, 64}, dt, 6);
          return Tensor::Where(a.Lt(b), a, b).Cast(dtypes::kFloat32);
        },
        tol);
    add(
        "cast_" + d,
        [dt](Engine* e, const std::string& dev) {
          return Input(e, dev, {1000}, dtypes::kFloat32, 7).Cast(dt).Cast(dtypes::kFloat64);
        },
        tol);
    if (dt.IsFloat()) {
      add(
          "unary_" + d,
          [dt](Engine* e, const std::string& dev) {
            Tensor a = Input(e, dev, {300}, dt, 8, true), b = Input(e, dev, {300}, dt, 9);
            return a.Log() + a.Sqrt() + b.Exp() + b.Sin() + b.Tanh() + b.Sigmoid() + a.Pow(b) / a +
                   b.Floor() + b.Abs();
          },
          dt.scalar == ScalarType::kFloat32 || dt.scalar == ScalarType::kFloat64 ? 1e-4 : 3 * tol);
      add(
          "sum_" + d,
          [dt](Engine* e, const std::string& dev) {
            return Input(e, dev, {16, 77}, dt, 10).Sum({1});
          },
          tol);
      add(
          "matmul_" + d,
          [dt](Engine* e, const std::string& dev) {
            return Input(e, dev, {24, 40}, dt, 11).Matmul(Input(e, dev, {40, 36}, dt, 12));
          },
          2 * tol);
    }
    if (dt.IsInt()) {
      add("intops_" + d, [dt](Engine* e, const std::string& dev) {
        Tensor a = Input(e, dev, {200}, dt, 13), b = Input(e, dev, {200}, dt, 14, true);
        Tensor s = Input(e, dev, {200}, dt, 15, true).Minimum(a.Scalar(3));
        return a.Div(b) + a.Mod(b) + a.BitwiseAnd(b) + a.BitwiseXor(b) + a.ShiftLeft(s) +
               a.ShiftRight(s);
      });
      add("sum_" + d, [dt](Engine* e, const std::string& dev) {
        return Input(e, dev, {9, 50}, dt, 16).Sum({0});
      });
    }
    if (dt.IsBool()) {
      add("logic_bool", [](Engine* e, const std::string& dev) {
        Tensor a = Input(e, dev, {100}, dtypes::kBool, 17),
               b = Input(e, dev, {100}, dtypes::kBool, 18);
        return a.LogicalAnd(b).LogicalOr(a.LogicalNot()).LogicalXor(b);
      });
    }
  }
  add("bitcast_f32_i32", [](Engine* e, const std::string& dev) {
    return Input(e, dev, {64}, dtypes::kFloat32, 19).Bitcast(dtypes::kInt32);
  });
  add("bitcast_f16_i16", [](Engine* e, const std::string& dev) {
    return Input(e, dev, {64}, dtypes::kFloat16, 20).Bitcast(dtypes::kInt16);
  });
  add("softmax", [](Engine* e, const std::string& dev) {
    return Input(e, dev, {6, 130}, dtypes::kFloat32, 21).Softmax(-1);
  });
  add("reduce_max_mean_argmax", [](Engine* e, const std::string& dev) {
    Tensor a = Input(e, dev, {4, 5, 33}, dtypes::kFloat32, 22);
    return a.Max({2}) + a.Mean({1}).Sum({1}, true) + a.Argmax(2).Cast(dtypes::kFloat32);
  });
  add("cumsum", [](Engine* e, const std::string& dev) {
    return Input(e, dev, {3, 45}, dtypes::kFloat32, 23).Cumsum(1);
  });
  add("sum_all", [](Engine* e, const std::string& dev) {
    return Input(e, dev, {40, 50}, dtypes::kFloat32, 24).Sum();
  });
  // Large enough for the 4x4 register tiles and 16x16 blocks.
  add(
      "matmul_tiled",
      [](Engine* e, const std::string& dev) {
        return Input(e, dev, {256, 64}, dtypes::kFloat32, 25)
            .Matmul(Input(e, dev, {64, 256}, dtypes::kFloat32, 26));
      },
      1e-4);
  add("matmul_batched", [](Engine* e, const std::string& dev) {
    return Input(e, dev, {3, 17, 20}, dtypes::kFloat32, 27)
        .Matmul(Input(e, dev, {20, 9}, dtypes::kFloat32, 28));
  });
  add("conv2d_bias_relu", [](Engine* e, const std::string& dev) {
    Tensor x = Input(e, dev, {2, 3, 17, 17}, dtypes::kFloat32, 29);
    Tensor w = Input(e, dev, {8, 3, 3, 3}, dtypes::kFloat32, 30);
    Tensor b = Input(e, dev, {8}, dtypes::kFloat32, 31);
    Tensor::ConvOptions o;
    o.padding = {{1, 1}, {1, 1}};
    o.stride = {2, 2};
    return x.Conv(w, &b, o).Relu();
  });
  add("depthwise_conv", [](Engine* e, const std::string& dev) {
    Tensor x = Input(e, dev, {1, 4, 12, 12}, dtypes::kFloat32, 32);
    Tensor w = Input(e, dev, {4, 1, 3, 3}, dtypes::kFloat32, 33);
    Tensor::ConvOptions o;
    o.groups = 4;
    return x.Conv(w, nullptr, o);
  });
  add("pools", [](Engine* e, const std::string& dev) {
    Tensor x = Input(e, dev, {2, 3, 10, 10}, dtypes::kFloat32, 34);
    Tensor::PoolOptions mp;
    mp.kernel = {2, 2};
    Tensor::PoolOptions ap;
    ap.kernel = {3, 3};
    ap.stride = {2, 2};
    ap.padding = {{1, 1}, {1, 1}};
    return x.MaxPool(mp).Sum({2, 3}) + x.AvgPool(ap).Sum({2, 3}) +
           x.GlobalAvgPool().Reshape({2, 3});
  });
  add("movement", [](Engine* e, const std::string& dev) {
    Tensor a = Input(e, dev, {4, 6, 5}, dtypes::kFloat32, 35);
    return a.Permute({2, 0, 1}).Pad({{1, 0}, {0, 2}, {1, 1}}, 0.5).Flip({1}).Contiguous() * 2.0;
  });
  add("five_dims", [](Engine* e, const std::string& dev) {
    // More output axes than grid dims: merged with div / mod.
    Tensor a = Input(e, dev, {3, 4, 5, 6, 7}, dtypes::kFloat32, 36);
    return a.Permute({4, 2, 0, 3, 1}).Contiguous() + 1.0;
  });
  // Few outputs, long reductions: GROUP (partials combined in local memory).
  add("group_sum_rows", [](Engine* e, const std::string& dev) {
    return Input(e, dev, {3, 4096}, dtypes::kFloat32, 37).Sum({1});
  });
  add(
      "group_max_float16",
      [](Engine* e, const std::string& dev) {
        return Input(e, dev, {2, 1024}, dtypes::kFloat16, 38).Max({1});
      },
      4e-3);
  add("group_softmax", [](Engine* e, const std::string& dev) {
    return Input(e, dev, {2, 512}, dtypes::kFloat32, 39).Softmax(-1);
  });
  add("group_layernorm_int_mean", [](Engine* e, const std::string& dev) {
    Tensor x = Input(e, dev, {2, 8, 64}, dtypes::kFloat32, 40);
    return x.LayerNorm({1, 2}) +
           Input(e, dev, {1, 640}, dtypes::kInt32, 41).Sum({1}, true).Cast(dtypes::kFloat32);
  });
  add("rand", [](Engine* e, const std::string& dev) {
    return Tensor::Rand(e, {500}, 42, dtypes::kFloat32, dev);
  });
  return cases;
}

}  // namespace kiln::gpu_test

#endif  // KILN_TESTS_GPU_OP_CASES_H_
