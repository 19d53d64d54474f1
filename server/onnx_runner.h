// kiln's model backend: ONNX models run by the engine (engine/onnx) with
// one engine JIT (engine/jit) per executor instance.
//
// OnnxLoader::Load parses the model and uploads its weights once
// (OnnxModel); each runner wraps OnnxModel::Run in its own kiln::Jit, so a
// batch shape runs plainly on first sight, is captured on the second call
// and replayed afterwards; a model that reads tensor data on the host while
// building its graph (NonZero, NMS, Loop) is captured in segments that
// break at those reads, and the JIT itself falls back to plain runs where
// that does not pay (engine/jit/jit.h). The JIT reports the path each call
// took and the engine's FLOP / byte estimates of the kernels it ran.
//
// Thread safety: OnnxLoader and the backend are thread-safe; a runner is
// used by one thread at a time.
#ifndef KILN_SERVER_ONNX_RUNNER_H_
#define KILN_SERVER_ONNX_RUNNER_H_

#include <memory>
#include <string>

#include "engine/realize/engine.h"
#include "server/runner.h"

namespace kiln {

class OnnxLoader : public BackendLoader {
 public:
  // `engine` must outlive the loader and everything it loads.
  explicit OnnxLoader(Engine* engine) : engine_(engine) {}
  absl::StatusOr<std::unique_ptr<ModelBackend>> Load(const std::string& path,
                                                     const std::string& device) override;

 private:
  Engine* const engine_;
};

}  // namespace kiln

#endif  // KILN_SERVER_ONNX_RUNNER_H_
