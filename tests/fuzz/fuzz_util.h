// Shared by kiln's libFuzzer targets (tests/fuzz/*_fuzz.cc), their replay
// tests and the seed generator:
//   * FUZZ_CHECK: a violated invariant is a finding, so it aborts (libFuzzer
//     and the replay test both report an abort), with the condition printed.
//   * The fixed model specs the request decoder is fuzzed against, as
//     config.pbtxt text, so the seeds and the target agree on them.
//
// Thread-compatible: the specs are built once, on first use.
#ifndef KILN_TESTS_FUZZ_FUZZ_UTIL_H_
#define KILN_TESTS_FUZZ_FUZZ_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/model_spec.h"

#define FUZZ_CHECK(cond)                                                             \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                           \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

namespace kiln::fuzz {

// A batching model: inputs of four dtypes (one that typed contents cannot
// carry), a dynamic dim, two outputs.
inline constexpr char kBatchedConfig[] = R"pb(
  name: "batched"
  max_batch_size: 4
  input [
    { name: "x" data_type: TYPE_FP32 dims: [ -1, 3 ] },
    { name: "ids" data_type: TYPE_INT64 dims: [ 2 ] },
    { name: "mask" data_type: TYPE_BOOL dims: [ -1 ] },
    { name: "h" data_type: TYPE_FP16 dims: [ 2 ] }
  ]
  output [
    { name: "y" data_type: TYPE_FP32 dims: [ -1 ] },
    { name: "n" data_type: TYPE_INT64 dims: [ 1 ] }
  ]
  dynamic_batching { priority_levels: 3 }
)pb";

// A model without a batch dim: a scalar input (which a client may also send
// as shape [1]), small integer types.
inline constexpr char kPlainConfig[] = R"pb(
  name: "plain"
  max_batch_size: 0
  input [
    { name: "sr" data_type: TYPE_INT32 dims: [ ] },
    { name: "img" data_type: TYPE_UINT8 dims: [ 2, -1 ] },
    { name: "x" data_type: TYPE_INT16 dims: [ -1 ] }
  ]
  output [ { name: "y" data_type: TYPE_FP64 dims: [ -1 ] } ]
)pb";

// The spec of `text`; aborts if it does not parse (a bug in this file).
inline ModelSpec SpecFromText(const std::string& text) {
  auto config = ParseModelConfigText(text, "fuzz/config.pbtxt");
  FUZZ_CHECK(config.ok());
  auto spec = ModelSpecFromConfig(*config, config->name());
  FUZZ_CHECK(spec.ok());
  return *spec;
}

inline const ModelSpec& BatchedSpec() {
  static const ModelSpec* spec = new ModelSpec(SpecFromText(kBatchedConfig));
  return *spec;
}

inline const ModelSpec& PlainSpec() {
  static const ModelSpec* spec = new ModelSpec(SpecFromText(kPlainConfig));
  return *spec;
}

}  // namespace kiln::fuzz

#endif  // KILN_TESTS_FUZZ_FUZZ_UTIL_H_
