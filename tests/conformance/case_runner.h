// Runs one directory of ONNX's backend test suite (model.onnx plus
// test_data_set_*/input_*.pb and output_*.pb) through kiln and compares
// the outputs with ONNX's tolerances.
#ifndef KILN_TESTS_CONFORMANCE_CASE_RUNNER_H_
#define KILN_TESTS_CONFORMANCE_CASE_RUNNER_H_

#include <string>

#include "absl/status/status.h"
#include "engine/onnx/host_tensor.h"
#include "engine/realize/engine.h"

namespace kiln {

// Tolerances: ONNX's defaults (rtol 1e-3, atol 1e-7) for float32 / float64.
// float16 gets atol 1e-3 (its unit roundoff is 4.9e-4, so a single rounding
// of an intermediate can move a small value by more than 1e-7), bfloat16
// atol 1e-2 / rtol 1e-2 (8-bit mantissa). Integers and bools must be exact.
struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};
Tolerance ToleranceFor(DType t);

// Compares `got` with `want` (dtype, shape, values); the error names the
// first mismatching element and counts the mismatches.
absl::Status CompareTensors(const HostTensor& got, const HostTensor& want);

// Loads `dir`/model.onnx, runs every test_data_set_* on `device` and checks
// the outputs. OK when all data sets match.
absl::Status RunConformanceCase(const std::string& dir, Engine* engine,
                                const std::string& device = "CPU");

}  // namespace kiln

#endif  // KILN_TESTS_CONFORMANCE_CASE_RUNNER_H_
