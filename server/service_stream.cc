// ModelStreamInfer: requests are read on the handler thread and submitted
// as they arrive; a writer thread sends each response as soon as its
// request completes (completion order, `id` echoed), with errors in-band
// in error_message. The handler returns once the client half-closed and
// every submitted request was answered, or, when the server shuts down,
// once every request read so far was answered (the call is then cancelled:
// a blocking Read cannot be interrupted otherwise).
#include <deque>
#include <map>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/service.h"

namespace kiln {
namespace {

struct StreamItem {
  std::unique_ptr<inference::ModelInferRequest> req;
  std::shared_ptr<LoadedModel> model;
  RequestPtr request;
  absl::Time start;
  absl::StatusOr<InferResult> result = absl::UnknownError("not completed");
  bool submitted = false;  // Submit returned (model / request are set)
  bool completed = false;  // result is final
};

// Shared with the completion callbacks; owns the items so that models are
// only released on the handler / writer threads, never in a callback.
struct StreamState {
  absl::Mutex mu;
  std::map<uint64_t, std::unique_ptr<StreamItem>> items ABSL_GUARDED_BY(mu);
  std::deque<uint64_t> done ABSL_GUARDED_BY(mu);
  bool reading_done ABSL_GUARDED_BY(mu) = false;
};

}  // namespace

grpc::Status InferenceService::ModelStreamInfer(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>*
        stream) {
  InferenceCore::ActiveCall active(core_);
  if (auto a = Authorize(ctx); !a.ok()) return Done("ModelStreamInfer", a);
  struct StreamSlot {
    explicit StreamSlot(std::atomic<int>* n) : n_(n) { ++*n_; }
    ~StreamSlot() { --*n_; }
    std::atomic<int>* n_;
  } slot(&streams_);
  if (streams_.load() > options_.max_streams)
    return Done("ModelStreamInfer", absl::ResourceExhaustedError(absl::StrCat(
                                        "too many streams: at most ", options_.max_streams,
                                        " at once")));
  auto st = std::make_shared<StreamState>();

  std::thread writer([this, st, stream, ctx] {
    bool cancelled = false;
    while (true) {
      std::unique_ptr<StreamItem> item;
      {
        absl::MutexLock l(&st->mu);
        auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(st->mu) {
          return !st->done.empty() || (st->reading_done && st->items.empty());
        };
        // Shutting down: once everything read is answered, end the call
        // (the reader may be blocked in Read for an idle client).
        while (!st->mu.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(50))) {
          if (!cancelled && core_->state()->shutting_down.load() && st->items.empty()) {
            ctx->TryCancel();
            cancelled = true;
          }
        }
        if (st->done.empty()) break;
        uint64_t seq = st->done.front();
        st->done.pop_front();
        auto it = st->items.find(seq);
        item = std::move(it->second);
        st->items.erase(it);
      }
      core_->Account(item->model.get(), item->start, item->result);
      inference::ModelStreamInferResponse resp;
      if (item->result.ok()) {
        EncodeInferResponse(*std::move(item->result), item->model->name(), item->model->version_string(),
                            item->req->id(), resp.mutable_infer_response());
        SetShmOutputParameters(*item->req, resp.mutable_infer_response());
      } else {
        resp.set_error_message(std::string(item->result.status().message()));
        resp.mutable_infer_response()->set_model_name(item->req->model_name());
        resp.mutable_infer_response()->set_id(item->req->id());
      }
      stream->Write(resp);  // a failed write means the client went away
    }
  });

  uint64_t seq = 0;
  while (true) {
    {
      // Backpressure: read on only while few enough requests are unanswered.
      absl::MutexLock l(&st->mu);
      auto room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(st->mu) {
        return static_cast<int>(st->items.size()) < options_.max_stream_inflight;
      };
      st->mu.Await(absl::Condition(&room));
    }
    auto req = std::make_unique<inference::ModelInferRequest>();
    if (!stream->Read(req.get())) break;
    uint64_t id = seq++;
    auto item = std::make_unique<StreamItem>();
    item->start = absl::Now();
    item->req = std::move(req);
    StreamItem* raw = item.get();
    {
      absl::MutexLock l(&st->mu);
      st->items[id] = std::move(item);
    }
    std::weak_ptr<StreamState> weak = st;
    std::shared_ptr<LoadedModel> model;
    RequestPtr request;
    absl::Status s = core_->Submit(
        *raw->req,
        [weak, id](absl::StatusOr<InferResult> r) {
          std::shared_ptr<StreamState> state = weak.lock();
          if (!state) return;
          absl::MutexLock l(&state->mu);
          auto it = state->items.find(id);
          if (it == state->items.end()) return;
          it->second->result = std::move(r);
          it->second->completed = true;
          if (it->second->submitted) state->done.push_back(id);
        },
        &model, &request);
    absl::MutexLock l(&st->mu);
    raw->model = std::move(model);
    raw->request = std::move(request);
    raw->submitted = true;
    if (!s.ok()) {
      raw->result = s;
      raw->completed = true;
    }
    if (raw->completed) st->done.push_back(id);
  }
  // The client half-closed (or went away): cancel what is still queued if
  // the call itself is cancelled, then wait for the writer.
  if (ctx->IsCancelled()) {
    absl::MutexLock l(&st->mu);
    for (auto& [id, item] : st->items)
      if (item->request) {
        item->request->Cancel();
        if (item->model) item->model->Wake();
      }
  }
  {
    absl::MutexLock l(&st->mu);
    st->reading_done = true;
  }
  writer.join();
  return Done("ModelStreamInfer", absl::OkStatus());
}

}  // namespace kiln
