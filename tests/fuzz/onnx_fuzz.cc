// libFuzzer target: a model.onnx as kilnd loads it. The bytes are loaded
// (LoadAsKilnd: from memory first, the ones that load again from
// <private temp dir>/model.onnx) by the server's OnnxLoader on the CPU
// device, which is what ModelManager::LoadVersion does: read the file
// (bounded), parse the ModelProto, validate the graphs (graph_check), decode
// the initializers and Constant nodes and upload them, and take the
// signature. Then, as LoadVersion, the spec is derived from the signature
// (no config.pbtxt) or checked against a config (models/simple's), and a
// runner is made. Inference never runs: that compiles kernels with clang,
// far too slow for fuzzing (tests/robustness runs hostile models instead).
//
// External data resolves inside the temp dir, which holds only the model
// itself. The device's memory limit is 256 MiB (kilnd: --max-memory-bytes),
// so a load past it must fail with RESOURCE_EXHAUSTED, not abort.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "engine/onnx/model.h"
#include "engine/realize/engine.h"
#include "engine/runtime/device.h"
#include "server/model_spec.h"
#include "server/onnx_runner.h"
#include "tests/fuzz/fuzz_util.h"

namespace kiln::fuzz {
namespace {

struct State {
  std::unique_ptr<DeviceRegistry> registry;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<OnnxLoader> loader;
  std::string dir, path;
};

std::string TempRoot() {
  for (const char* var : {"TEST_TMPDIR", "TMPDIR"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return v;
  return "/tmp";
}

State& GetState() {
  static State* s = [] {
    auto* st = new State();
    st->registry = DeviceRegistry::WithDefaults();
    auto cpu = st->registry->Get("CPU");
    FUZZ_CHECK(cpu.ok());
    (*cpu)->allocator().set_memory_limit(size_t{256} << 20);
    st->engine = std::make_unique<Engine>(st->registry.get());
    st->loader = std::make_unique<OnnxLoader>(st->engine.get());
    std::string tmpl = TempRoot() + "/kiln-onnx-fuzz-XXXXXX";
    FUZZ_CHECK(mkdtemp(tmpl.data()) != nullptr);
    st->dir = tmpl;
    st->path = st->dir + "/model.onnx";
    std::atexit([] {
      ::unlink(GetState().path.c_str());
      ::rmdir(GetState().dir.c_str());
    });
    return st;
  }();
  return *s;
}

void WriteModel(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  FUZZ_CHECK(f != nullptr);
  FUZZ_CHECK(size == 0 || std::fwrite(data, 1, size, f) == size);
  FUZZ_CHECK(std::fclose(f) == 0);
}

// What the request decoder and the executor take for granted of a loaded
// model's signature: input dtypes with a size (the decoder divides by it),
// dims -1 (dynamic) or >= 0.
void CheckSignature(const ModelSignature& sig) {
  for (const TensorSpec& t : sig.inputs) {
    FUZZ_CHECK(t.dtype.ItemSize() > 0);
    for (int64_t d : t.dims) FUZZ_CHECK(d >= -1);
  }
}

// models/simple/config.pbtxt, without its warm-up (which would run the model).
constexpr char kSimpleConfig[] = R"pb(
  name: "simple"
  max_batch_size: 8
  input [
    { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
    { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }
  ]
  output [
    { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
    { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] }
  ]
  dynamic_batching { max_queue_delay_microseconds: 100 }
)pb";

void LoadAsKilnd(const uint8_t* data, size_t size) {
  State& st = GetState();
  // Written first: external data named "model.onnx" is then this model.
  WriteModel(st.path, data, size);
  // Most inputs fail to load. They are loaded from memory first: the same
  // parse and validation as from the file (OnnxModel::Load is a bounded read
  // plus LoadFromBytes), without the read, which zero-fills 1 MiB past the
  // file's end to see it end and cut the executions per second 2-3x
  // under ASan. A model that loads is then loaded again through the
  // server's loader, from the file, and must load there too.
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!OnnxModel::LoadFromBytes(bytes, st.engine.get(), "CPU", st.dir).ok()) return;
  absl::StatusOr<std::unique_ptr<ModelBackend>> backend = st.loader->Load(st.path, "CPU");
  // The loader adds the server's own checks (no sequences, a known rank).
  if (!backend.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(backend.status()));
    return;
  }
  const ModelSignature& sig = (*backend)->signature();
  CheckSignature(sig);
  absl::StatusOr<ModelSpec> derived = DeriveModelSpec(sig, "fuzz", /*default_max_batch=*/8);
  if (derived.ok()) FUZZ_CHECK(derived->inputs.size() == sig.inputs.size());
  static const ModelSpec* simple = new ModelSpec(SpecFromText(kSimpleConfig));
  ModelSpec configured = *simple;
  (void)CompleteSpecFromModel(sig, &configured);
  auto runner = (*backend)->NewRunner(RunnerOptions{});
  FUZZ_CHECK(runner.ok());
}

}  // namespace
}  // namespace kiln::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::LoadAsKilnd(data, size);
  return 0;
}
