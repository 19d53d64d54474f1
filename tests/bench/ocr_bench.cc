// PaddleOCR models through kiln (JIT replay, CPU) and onnxruntime-node in the
// same run. Prints `ocr_<case>: X ms`, `ort_<case>: X ms` and
// `ocr_<case>_vs_ort: X` (kiln time / ORT time: below 1 means kiln is faster).
// Needs tools/fetch_testdata (models + onnxruntime-node in $KILN_DATA).
//   ocr_bench [--quick] [filter]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/jit/jit.h"
#include "engine/onnx/model.h"
#include "engine/runtime/device.h"
#include "tests/bench/bench_util.h"

namespace kiln::bench {
namespace {

struct Case {
  std::string name, model;
  Shape shape;
};

std::string DataDir() {
  if (const char* d = std::getenv("KILN_DATA")) return d;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/kiln/data";
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln;
  using namespace kiln::bench;
  bool quick = false;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else filter = argv[i];
  }
  const std::string det = "ch_PP-OCRv4_det_infer.onnx", rec = "ch_PP-OCRv4_rec_infer.onnx",
                    cls = "ch_ppocr_mobile_v2.0_cls_infer.onnx";
  std::vector<Case> cases = {
      {"det_640", det, {1, 3, 640, 640}}, {"rec_320", rec, {1, 3, 48, 320}},
      {"cls_192", cls, {1, 3, 48, 192}},  {"det_640_b8", det, {8, 3, 640, 640}},
      {"rec_320_b8", rec, {8, 3, 48, 320}}, {"cls_192_b8", cls, {8, 3, 48, 192}}};
  if (quick) cases.resize(3);
  std::string dir = DataDir() + "/ocr-models";
  auto registry = DeviceRegistry::WithDefaults();
  Engine engine(registry.get());
  std::map<std::string, double> kiln_ms;
  std::string ort_args;
  for (const Case& c : cases) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
    auto model = OnnxModel::Load(dir + "/" + c.model, &engine, "CPU");
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s (run tools/fetch_testdata)\n", c.name.c_str(),
                   std::string(model.status().message()).c_str());
      return 1;
    }
    const OnnxModel* m = model->get();
    Jit jit([m](const std::vector<Tensor>& in) { return m->Run(in); });
    Tensor x = Tensor::Rand(&engine, c.shape, 7) - 0.5;
    if (!x.Realize().ok()) return 1;
    bool failed = false;
    auto run = [&] {
      auto r = jit({x});
      if (!r.ok()) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(), std::string(r.status().message()).c_str());
        failed = true;
      }
    };
    double s = MedianSeconds(run, quick ? 5 : 20, 3, quick ? 5 : 15);
    if (failed) return 1;
    kiln_ms[c.name] = s * 1e3;
    Report("ocr_" + c.name, s * 1e3, "ms");
    std::string dims;
    for (int64_t d : c.shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    ort_args += " " + c.name + ":" + c.model + ":" + dims;
  }
  if (ort_args.empty()) return 0;
  // onnxruntime in the same run, same thread count as kiln's pool.
  std::string cmd = "NODE_PATH='" + DataDir() + "/ort/node_modules' node " +
                    "tests/bench/ort_bench.js '" + dir + "' 2" + ort_args;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return 1;
  char line[512];
  while (std::fgets(line, sizeof(line), p)) {
    std::string l = line;
    std::fputs(line, stdout);
    // "ort_<name>: <ms> ms"
    size_t colon = l.find(':');
    if (l.rfind("ort_", 0) != 0 || colon == std::string::npos) continue;
    std::string name = l.substr(4, colon - 4);
    double ort = std::atof(l.c_str() + colon + 1);
    if (ort > 0 && kiln_ms.count(name)) Report("ocr_" + name + "_vs_ort", kiln_ms[name] / ort, "x");
  }
  return pclose(p) == 0 ? 0 : 1;
}
