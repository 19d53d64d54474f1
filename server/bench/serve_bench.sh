#!/usr/bin/env bash
# serve_bench: `kiln perf` figures of kilnd (one `name: value unit` line each):
#   - the shipped simple model and PaddleOCR det at 640x640 (if tools/fetch_models
#     fetched it), concurrency 1, 4 and 16, with and without dynamic batching;
#   - the same simple-model requests against echo_server, a bare gRPC server
#     that echoes its inputs: the ceiling, and server_overhead_ratio_cN =
#     echo throughput / kilnd throughput (simple, no batching) at concurrency N.
# Run: bazel run -c opt //server/bench:serve_bench [-- --quick]   (--quick: no det)
set -euo pipefail
quick=0
[ "${1:-}" = "--quick" ] && quick=1
here="$PWD"  # runfiles root of the workspace
root="${BUILD_WORKSPACE_DIRECTORY:-$here}"
KILND="$here/server/kilnd"
KILN="$here/clients/kiln"
ECHO="$here/server/bench/echo_server"
tmp="$(mktemp -d -t kiln-serve-bench.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

simple_cfg() {  # $1: name, $2: dynamic_batching block or ""
  cat <<CFG
name: "$1"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
$2
CFG
}
det_cfg() {
  cat <<CFG
name: "$1"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] } ]
output [ { name: "sigmoid_0.tmp_0" data_type: TYPE_FP32 dims: [ 1, -1, -1 ] } ]
$2
model_warmup [ { name: "640" batch_size: 1
  inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 3, 640, 640 ] random_data: true } } } ]
CFG
}
add_model() {  # $1: name, $2: model file, $3: config text
  mkdir -p "$tmp/repo/$1/1"
  ln -s "$2" "$tmp/repo/$1/1/model.onnx"
  printf '%s\n' "$3" > "$tmp/repo/$1/config.pbtxt"
}

mkdir -p "$tmp/repo"
simple="$here/models/simple/1/model.onnx"
add_model simple_nobatch "$simple" "$(simple_cfg simple_nobatch "")"
add_model simple_batched "$simple" "$(simple_cfg simple_batched "dynamic_batching { max_queue_delay_microseconds: 500 }")"
det="$root/models/ocr_det/1/model.onnx"
have_det=0
if [ "$quick" = 0 ] && [ -f "$det" ]; then
  have_det=1
  add_model det_nobatch "$det" "$(det_cfg det_nobatch "")"
  add_model det_batched "$det" "$(det_cfg det_batched "dynamic_batching { max_queue_delay_microseconds: 20000 }")"
fi

wait_ready() {  # $1: ready file, $2: pid
  for _ in $(seq 6000); do
    [ -f "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || { echo "serve_bench: server exited" >&2; return 1; }
    sleep 0.05
  done
  return 1
}
port_of() { sed -n 's/^grpc_port=//p' "$1"; }

"$KILND" --model-repository="$tmp/repo" --address=127.0.0.1 --grpc-port=0 --metrics-port=-1 --http-port=-1 \
  --ready-file="$tmp/kilnd.ready" 2>"$tmp/kilnd.log" &
pids+=($!)
wait_ready "$tmp/kilnd.ready" "${pids[-1]}" || { cat "$tmp/kilnd.log" >&2; exit 1; }
kurl="127.0.0.1:$(port_of "$tmp/kilnd.ready")"

perf() {  # $1: url, $2: model, $3: prefix, rest: extra perf flags
  local url="$1" model="$2" prefix="$3"
  shift 3
  "$KILN" --url "$url" --timeout 600 perf --model "$model" --concurrency 1,4,16 \
    --bench-prefix "$prefix" "$@" | tee -a "$tmp/perf.txt" | grep -E '^[a-z0-9_]+: '
}

perf "$kurl" simple_nobatch serve_simple_nobatch --window-ms 1000
perf "$kurl" simple_batched serve_simple_batched --window-ms 1000
if [ "$have_det" = 1 ]; then
  perf "$kurl" det_nobatch serve_det640_nobatch --shape x=1,3,640,640 --window-ms 4000 --max-windows 5 --stability 0.2
  perf "$kurl" det_batched serve_det640_batched --shape x=1,3,640,640 --window-ms 4000 --max-windows 5 --stability 0.2
else
  echo "# det 640 skipped (--quick, or models/ocr_det missing: run tools/fetch_models)"
fi

"$ECHO" --ready-file="$tmp/echo.ready" 2>"$tmp/echo.log" &
pids+=($!)
wait_ready "$tmp/echo.ready" "${pids[-1]}" || { cat "$tmp/echo.log" >&2; exit 1; }
perf "127.0.0.1:$(port_of "$tmp/echo.ready")" simple serve_echo --window-ms 1000

for c in 1 4 16; do
  k=$(sed -n "s/^serve_simple_nobatch_c${c}_throughput: \([0-9.]*\).*/\1/p" "$tmp/perf.txt")
  e=$(sed -n "s/^serve_echo_c${c}_throughput: \([0-9.]*\).*/\1/p" "$tmp/perf.txt")
  if [ -n "$k" ] && [ -n "$e" ]; then
    awk -v k="$k" -v e="$e" -v c="$c" \
      'BEGIN { if (k > 0) printf "server_overhead_ratio_c%s: %.2f x\n", c, e / k }'
  fi
done
