#include "server/onnx_runner.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/base/status.h"
#include "engine/jit/jit.h"
#include "engine/onnx/model.h"
#include "engine/runtime/thread_pool.h"
#include "engine/tensor/tensor.h"

namespace kiln {
namespace {

uint64_t NsSince(absl::Time t) {
  return static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Now() - t));
}

absl::StatusOr<std::vector<TensorSpec>> ToSpecs(const std::vector<ValueInfo>& infos,
                                                const std::string& kind) {
  std::vector<TensorSpec> out;
  for (const ValueInfo& v : infos) {
    if (v.is_sequence)
      return absl::InvalidArgumentError(absl::StrCat("model ", kind, " '", v.name,
                                                     "' is a sequence; kiln serves tensors only"));
    if (!v.rank_known)
      return absl::InvalidArgumentError(absl::StrCat(
          "model ", kind, " '", v.name, "' declares no shape; kiln needs at least its rank"));
    // -1 is a dynamic dim; below that no request could ever match the model
    // (such a model loaded READY and refused every request; the bound
    // tests/fuzz/onnx_fuzz.cc checks).
    for (int64_t d : v.dims)
      if (d < -1)
        return absl::InvalidArgumentError(absl::StrCat("model ", kind, " '", v.name,
                                                       "' has a negative dim ", d));
    out.push_back({v.name, v.dtype, v.dims});
  }
  return out;
}

Jit::Options JitOptions(const JitLimits& limits) {
  Jit::Options o;
  o.max_captures = limits.max_captures;
  o.max_capture_bytes = limits.max_capture_bytes;
  return o;
}

class OnnxRunner : public ModelRunner {
 public:
  // `pool`: the threads this instance's CPU kernels run on (null: the
  // device's).
  OnnxRunner(std::shared_ptr<const OnnxModel> model, Engine* engine, const JitLimits& limits,
             std::unique_ptr<ThreadPool> pool)
      : model_(std::move(model)),
        engine_(engine),
        pool_(std::move(pool)),
        jit_(
            [m = model_.get()](const std::vector<Tensor>& in) { return m->Run(in); },
            JitOptions(limits)) {}

  absl::StatusOr<std::vector<OutputTensor>> Run(const std::vector<InputTensor>& inputs,
                                                RunStats* stats) override {
    absl::Time t0 = absl::Now();
    std::vector<Tensor> tensors;
    tensors.reserve(inputs.size());
    for (const InputTensor& in : inputs) {
      Tensor t = Tensor::FromData(engine_, in.data.data(), in.data.size(), in.shape, in.dtype,
                                  model_->device());
      if (!t.ok()) return t.status();
      tensors.push_back(std::move(t));
    }
    stats->input_ns = NsSince(t0);

    absl::Time t1 = absl::Now();
    ThreadPool::Scope threads(pool_.get());
    ASSIGN_OR_RETURN(Jit::Result r, jit_.Call(tensors));
    switch (r.path) {
      case Jit::Path::kPlain: stats->path = RunStats::Path::kPlain; break;
      case Jit::Path::kCapture: stats->path = RunStats::Path::kCapture; break;
      case Jit::Path::kReplay: stats->path = RunStats::Path::kReplay; break;
    }
    stats->flops = r.flops;
    stats->bytes = r.bytes;
    stats->kernels = r.kernels;
    std::vector<Tensor> outs = std::move(r.outputs);
    stats->infer_ns = NsSince(t1);

    absl::Time t2 = absl::Now();
    const std::vector<ValueInfo>& infos = model_->outputs();
    if (outs.size() != infos.size())
      return absl::InternalError(absl::StrCat("model returned ", outs.size(), " outputs, expected ",
                                              infos.size()));
    std::vector<OutputTensor> result;
    result.reserve(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      OutputTensor o;
      o.name = infos[i].name;
      o.dtype = outs[i].dtype();
      o.shape = outs[i].shape();
      o.data.resize(outs[i].nbytes());  // the device's bytes go straight here
      RETURN_IF_ERROR(outs[i].CopyBytesTo(o.data.data(), o.data.size()));
      result.push_back(std::move(o));
    }
    stats->output_ns = NsSince(t2);
    return result;
  }

  bool HasCapture(const std::vector<DType>& dtypes,
                  const std::vector<std::vector<int64_t>>& shapes) const override {
    return jit_.HasCapture(dtypes, shapes, model_->device());
  }

 private:
  std::shared_ptr<const OnnxModel> model_;
  Engine* const engine_;
  const std::unique_ptr<ThreadPool> pool_;  // may be null
  Jit jit_;
};

class OnnxBackend : public ModelBackend {
 public:
  OnnxBackend(std::shared_ptr<const OnnxModel> model, Engine* engine, ModelSignature sig)
      : model_(std::move(model)), engine_(engine), sig_(std::move(sig)) {}
  const ModelSignature& signature() const override { return sig_; }
  absl::StatusOr<std::unique_ptr<ModelRunner>> NewRunner(const RunnerOptions& options) override {
    std::unique_ptr<ThreadPool> pool;
    absl::StatusOr<Device*> dev = engine_->GetDevice(model_->device());
    if (options.threads > 0 && dev.ok() && (*dev)->renderer() == "c")
      pool = std::make_unique<ThreadPool>(options.threads);
    return std::unique_ptr<ModelRunner>(
        new OnnxRunner(model_, engine_, options.jit, std::move(pool)));
  }

 private:
  std::shared_ptr<const OnnxModel> model_;
  Engine* const engine_;
  ModelSignature sig_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBackend>> OnnxLoader::Load(const std::string& path,
                                                               const std::string& device) {
  ASSIGN_OR_RETURN(std::unique_ptr<OnnxModel> model, OnnxModel::Load(path, engine_, device));
  ModelSignature sig;
  ASSIGN_OR_RETURN(sig.inputs, ToSpecs(model->inputs(), "input"));
  ASSIGN_OR_RETURN(sig.outputs, ToSpecs(model->outputs(), "output"));
  std::shared_ptr<const OnnxModel> shared(std::move(model));
  return std::unique_ptr<ModelBackend>(new OnnxBackend(std::move(shared), engine_, std::move(sig)));
}

}  // namespace kiln
