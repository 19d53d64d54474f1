// echo_server: the ceiling for kiln's serving overhead. A bare gRPC server
// (same sync gRPC server setup as kilnd) that answers ModelInfer for the
// `simple` model's signature by echoing INPUT0 / INPUT1 back as OUTPUT0 /
// OUTPUT1 (raw), with no validation, batching, engine or metrics.
// ModelMetadata / ModelConfig describe `simple` so `kiln perf` can drive it.
//
//   echo_server --port=0 --ready-file=F     (writes grpc_port=N to F)
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/flags.h"

namespace {

class EchoService final : public inference::GRPCInferenceService::Service {
 public:
  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest*,
                             inference::ModelMetadataResponse* r) override {
    r->set_name("simple");
    r->add_versions("1");
    r->set_platform("echo");
    for (const char* n : {"INPUT0", "INPUT1"}) {
      auto* t = r->add_inputs();
      t->set_name(n);
      t->set_datatype("FP32");
      t->add_shape(-1);
      t->add_shape(16);
    }
    return grpc::Status::OK;
  }
  grpc::Status ModelConfig(grpc::ServerContext*, const inference::ModelConfigRequest*,
                           inference::ModelConfigResponse* r) override {
    r->mutable_config()->set_name("simple");
    r->mutable_config()->set_max_batch_size(8);
    return grpc::Status::OK;
  }
  grpc::Status ModelStatistics(grpc::ServerContext*, const inference::ModelStatisticsRequest*,
                               inference::ModelStatisticsResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* req,
                          inference::ModelInferResponse* resp) override {
    resp->set_model_name(req->model_name());
    resp->set_model_version("1");
    resp->set_id(req->id());
    for (int i = 0; i < req->inputs_size(); ++i) {
      auto* o = resp->add_outputs();
      o->set_name(i == 0 ? "OUTPUT0" : "OUTPUT1");
      o->set_datatype(req->inputs(i).datatype());
      *o->mutable_shape() = req->inputs(i).shape();
      if (i < req->raw_input_contents_size())
        resp->add_raw_output_contents(req->raw_input_contents(i));
    }
    return grpc::Status::OK;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int64_t port = 0;
  std::string address = "127.0.0.1", ready_file;
  kiln::FlagParser flags;
  flags.AddInt("port", &port, "gRPC port (0: any free port)");
  flags.AddString("address", &address, "bind address");
  flags.AddString("ready-file", &ready_file, "write grpc_port=N here once serving");
  absl::Status s = flags.Parse(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "echo_server: %s\n%s", std::string(s.message()).c_str(),
                 flags.Usage().c_str());
    return 2;
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  EchoService service;
  grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort(absl::StrCat(address, ":", port), grpc::InsecureServerCredentials(),
                           &selected);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(256 << 20);
  auto server = builder.BuildAndStart();
  if (!server || selected == 0) {
    std::fprintf(stderr, "echo_server: cannot listen on %s:%ld\n", address.c_str(),
                 static_cast<long>(port));
    return 1;
  }
  if (!ready_file.empty()) {
    std::ofstream(ready_file + ".tmp") << "grpc_port=" << selected << "\n";
    std::rename((ready_file + ".tmp").c_str(), ready_file.c_str());
  }
  std::fprintf(stderr, "echo_server: serving on %s:%d\n", address.c_str(), selected);
  int sig = 0;
  sigwait(&sigs, &sig);
  server->Shutdown(std::chrono::system_clock::now());
  return 0;
}
