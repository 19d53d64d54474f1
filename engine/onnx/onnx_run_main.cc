// onnx_run: runs an ONNX model on .npy inputs (a developer tool).
//
//   onnx_run MODEL.onnx IN_0.npy [IN_1.npy ...] [--device=CPU] [--out=DIR]
//            [--expect=OUT_0.npy,...] [--atol=1e-4] [--rtol=1e-3] [--repeat=N]
//
// Inputs bind to the model's inputs in order. --out writes output_<i>.npy;
// --expect compares the outputs with reference files and exits 1 on a
// mismatch. Prints the build, realize and total times per run.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/onnx/model.h"
#include "engine/onnx/npy.h"
#include "engine/runtime/device.h"

namespace kiln {
namespace {

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Max abs error and the number of elements outside atol + rtol * |want|.
int64_t Compare(const HostTensor& got, const HostTensor& want, double atol, double rtol,
                double* max_err) {
  int64_t bad = 0;
  *max_err = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.GetDouble(i), w = want.GetDouble(i), e = std::fabs(g - w);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (!(e <= *max_err)) *max_err = e;
    if (!(e <= atol + rtol * std::fabs(w))) ++bad;
  }
  return bad;
}

int Main(int argc, char** argv) {
  std::string model_path, device = "CPU", out_dir;
  std::vector<std::string> inputs, expect;
  double atol = 1e-4, rtol = 1e-3;
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) { return a.substr(std::string(flag).size()); };
    if (absl::StartsWith(a, "--device=")) device = value("--device=");
    else if (absl::StartsWith(a, "--out=")) out_dir = value("--out=");
    else if (absl::StartsWith(a, "--expect=")) expect = absl::StrSplit(value("--expect="), ',');
    else if (absl::StartsWith(a, "--atol=")) (void)absl::SimpleAtod(value("--atol="), &atol);
    else if (absl::StartsWith(a, "--rtol=")) (void)absl::SimpleAtod(value("--rtol="), &rtol);
    else if (absl::StartsWith(a, "--repeat=")) (void)absl::SimpleAtoi(value("--repeat="), &repeat);
    else if (model_path.empty()) model_path = a;
    else inputs.push_back(a);
  }
  if (model_path.empty()) {
    std::fprintf(stderr, "usage: onnx_run MODEL.onnx IN.npy... [--device=] [--out=] [--expect=]\n");
    return 2;
  }
  auto registry = DeviceRegistry::WithDefaults();
  Engine engine(registry.get());
  auto t0 = std::chrono::steady_clock::now();
  auto model = OnnxModel::Load(model_path, &engine, device);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  std::printf("load: %.3f s\n", Seconds(t0, std::chrono::steady_clock::now()));
  std::vector<HostTensor> host_in;
  for (const std::string& p : inputs) {
    auto h = ReadNpy(p);
    if (!h.ok()) {
      std::fprintf(stderr, "%s\n", std::string(h.status().message()).c_str());
      return 1;
    }
    host_in.push_back(std::move(*h));
  }
  std::vector<HostTensor> results;
  for (int r = 0; r < repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    std::vector<Tensor> in;
    for (const HostTensor& h : host_in)
      in.push_back(Tensor::FromData(&engine, h.data.data(), h.data.size(), h.shape, h.dtype, device));
    auto outs = (*model)->Run(in);
    if (!outs.ok()) {
      std::fprintf(stderr, "%s\n", std::string(outs.status().message()).c_str());
      return 1;
    }
    auto built = std::chrono::steady_clock::now();
    std::vector<Tensor*> ptrs;
    for (Tensor& t : *outs) ptrs.push_back(&t);
    absl::Status s = Tensor::RealizeAll(ptrs);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    auto done = std::chrono::steady_clock::now();
    results.clear();
    for (Tensor& t : *outs) {
      auto h = ReadBack(t);
      if (!h.ok()) return 1;
      results.push_back(std::move(*h));
    }
    std::printf("run %d: build %.3f s, realize %.3f s\n", r, Seconds(start, built),
                Seconds(built, done));
  }
  int rc = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    std::printf("output %zu: %s\n", i, results[i].DebugString().c_str());
    if (!out_dir.empty()) {
      absl::Status s = WriteNpy(out_dir + "/output_" + std::to_string(i) + ".npy", results[i]);
      if (!s.ok()) std::fprintf(stderr, "%s\n", std::string(s.message()).c_str()), rc = 1;
    }
    if (i < expect.size()) {
      auto want = ReadNpy(expect[i]);
      if (!want.ok() || want->shape != results[i].shape) {
        std::printf("output %zu: reference missing or of another shape\n", i);
        rc = 1;
        continue;
      }
      double max_err;
      int64_t bad = Compare(results[i], *want, atol, rtol, &max_err);
      std::printf("output %zu: max abs error %.3g, %lld of %lld outside tolerance\n", i, max_err,
                  static_cast<long long>(bad), static_cast<long long>(want->numel()));
      if (bad) rc = 1;
    }
  }
  return rc;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) { return kiln::Main(argc, argv); }
