// Robustness of the ONNX importer against bad input, over the models of the
// ONNX test suite: truncated or corrupted model bytes and inputs of the wrong
// shape must give errors (or results), never crash. Graphs are built but not
// realized, so no kernels are compiled.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/base/flags.h"
#include "engine/onnx/model.h"
#include "engine/onnx/onnx/onnx.pb.h"
#include "engine/onnx/tensor_proto.h"
#include "engine/runtime/device.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

std::vector<std::string> ModelDirs() {
  std::string root = GetEnvString("KILN_ONNX_TESTDATA", "/usr/share/libonnx-testdata/data");
  std::vector<std::string> out;
  for (const char* folder : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    std::string dir = root + "/" + folder;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name[0] != '.') out.push_back(dir + "/" + name);
      }
      closedir(d);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Engine* TheEngine() {
  static DeviceRegistry* reg = DeviceRegistry::WithDefaults().release();
  static Engine* e = new Engine(reg);
  return e;
}

TEST(RobustnessTest, CorruptModelBytes) {
  std::vector<std::string> dirs = ModelDirs();
  if (dirs.empty()) GTEST_SKIP() << "libonnx-testdata is not installed";
  int loaded = 0;
  for (const std::string& dir : dirs) {
    auto bytes = ReadFileToString(dir + "/model.onnx");
    if (!bytes.ok()) continue;
    // Truncations and a flipped byte in the middle.
    std::vector<std::string> variants = {bytes->substr(0, bytes->size() / 2),
                                         bytes->substr(0, bytes->size() - 1), *bytes};
    variants[2][variants[2].size() / 2] ^= 0x5a;
    for (const std::string& v : variants) {
      auto m = OnnxModel::LoadFromBytes(v, TheEngine(), "CPU");
      if (!m.ok()) continue;
      ++loaded;
      std::vector<OnnxValue> none;
      (void)(*m)->RunValues(none);  // wrong input count: an error
    }
  }
  SUCCEED() << loaded << " corrupted models still loaded";
}

TEST(RobustnessTest, WrongInputShapes) {
  std::vector<std::string> dirs = ModelDirs();
  if (dirs.empty()) GTEST_SKIP() << "libonnx-testdata is not installed";
  int built = 0, errors = 0;
  for (const std::string& dir : dirs) {
    // Declared input shapes are dropped so that mis-shaped inputs reach the ops.
    auto bytes = ReadFileToString(dir + "/model.onnx");
    onnx::ModelProto proto;
    if (!bytes.ok() || !proto.ParseFromString(*bytes)) continue;
    for (auto& in : *proto.mutable_graph()->mutable_input())
      if (in.type().has_tensor_type()) in.mutable_type()->mutable_tensor_type()->clear_shape();
    auto m = OnnxModel::LoadFromBytes(proto.SerializeAsString(), TheEngine(), "CPU", dir);
    if (!m.ok()) continue;
    // Every input one element longer in its last dim (or a scalar made 1-D),
    // and, separately, every input with an extra leading dim.
    for (int variant = 0; variant < 2; ++variant) {
      std::vector<OnnxValue> in;
      bool tensors = true;
      for (size_t i = 0; i < (*m)->inputs().size(); ++i) {
        auto h = ReadTensorProtoFile(absl::StrCat(dir, "/test_data_set_0/input_", i, ".pb"));
        if (!h.ok() || (*m)->inputs()[i].is_sequence || (*m)->inputs()[i].is_optional) {
          tensors = false;
          break;
        }
        Shape s = h->shape;
        if (variant == 0) {
          if (s.empty()) s.push_back(1);
          s.back() += 1;
        } else {
          s.insert(s.begin(), 2);
        }
        HostTensor bad(h->dtype, s);
        in.push_back(OnnxValue::FromTensor(
            Tensor::FromData(TheEngine(), bad.data.data(), bad.data.size(), s, bad.dtype, "CPU")));
      }
      if (!tensors) break;
      auto out = (*m)->RunValues(in);  // must not crash; errors are fine
      if (out.ok()) ++built;
      else ++errors;
    }
  }
  std::printf("robustness: %d graphs built, %d errors\n", built, errors);
}

}  // namespace
}  // namespace kiln
