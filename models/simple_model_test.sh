#!/usr/bin/env bash
# Regenerates the simple model and compares it with the committed file.
set -euo pipefail
gen="$1"
committed="$2"
out="${TEST_TMPDIR:-/tmp}/simple.onnx"
"$gen" "$out"
if ! cmp -s "$out" "$committed"; then
  echo "models/simple/1/model.onnx differs from what make_simple_model writes;" >&2
  echo "regenerate: bazel run //models:make_simple_model -- \$PWD/models/simple/1/model.onnx" >&2
  exit 1
fi
echo "simple model matches its generator"
