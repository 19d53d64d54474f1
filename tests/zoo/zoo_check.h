// How a zoo case's output is compared with onnxruntime's reference:
// same shape, every element within atol + rtol * |reference| (NaN matches
// NaN, infinities must be equal), and with an argmax check the argmax over
// the last axis must match in every row. A reference whose elements are all
// equal (a degenerate random-weight model) is refused: a match on it proves
// nothing.
//
// Thread safety: pure functions.
#ifndef KILN_TESTS_ZOO_ZOO_CHECK_H_
#define KILN_TESTS_ZOO_ZOO_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kiln {

struct ZooValues {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

struct CompareResult {
  double max_abs_err = 0;
  int64_t elements = 0;
};

absl::Status CompareOutput(const std::string& name, const ZooValues& got, const ZooValues& want,
                           double atol, double rtol, bool argmax, CompareResult* result);

}  // namespace kiln

#endif  // KILN_TESTS_ZOO_ZOO_CHECK_H_
