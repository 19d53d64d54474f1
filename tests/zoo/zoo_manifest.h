// The model zoo's manifest ($KILN_DATA/zoo/manifest.tsv, written by
// tools/zoo/zoo_reference.js): one case per line, TAB-separated
//   name family opset batch model check atol rtol inputs outputs ort_ms
// where inputs / outputs are comma-separated `onnx_name=relative/path.npy`
// and check is `-` or comma-separated `kind:output_index` items (argmax,
// detection). Paths are relative to the zoo directory.
//
// Thread safety: pure functions.
#ifndef KILN_TESTS_ZOO_ZOO_MANIFEST_H_
#define KILN_TESTS_ZOO_ZOO_MANIFEST_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln {

struct ZooCase {
  std::string name, family, model;  // model: path relative to the zoo dir
  int opset = 0;
  int batch = 0;
  std::vector<std::pair<std::string, int>> checks;  // (kind, output index)
  double atol = 1e-4, rtol = 1e-3;
  std::vector<std::pair<std::string, std::string>> inputs, outputs;  // (name, path)
  double ort_ms = 0;

  // "resnet18_op17_b8": a gtest-safe case name.
  std::string Id() const;
};

// The directory of a zoo set: $KILN_DATA/<set>, KILN_DATA defaulting to
// ~/.cache/kiln/data. Sets: "zoo" (the models, tools/zoo/export_zoo.py) and
// "ops" (one graph per operation, tools/zoo/export_ops.py).
std::string ZooDir(const std::string& set = "zoo");

absl::StatusOr<std::vector<ZooCase>> ParseZooManifest(const std::string& text);
absl::StatusOr<std::vector<ZooCase>> ReadZooManifest(const std::string& zoo_dir);

}  // namespace kiln

#endif  // KILN_TESTS_ZOO_ZOO_MANIFEST_H_
