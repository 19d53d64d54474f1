#include "clients/client.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kiln {
namespace {

template <typename T>
void AppendValues(const google::protobuf::RepeatedField<T>& v, std::string* out) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <typename Dst, typename Src>
void AppendNarrowed(const google::protobuf::RepeatedField<Src>& v, std::string* out) {
  for (Src x : v) {
    Dst d = static_cast<Dst>(x);
    out->append(reinterpret_cast<const char*>(&d), sizeof(Dst));
  }
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

int DatatypeSize(const std::string& t) {
  if (t == "BOOL" || t == "INT8" || t == "UINT8") return 1;
  if (t == "INT16" || t == "UINT16" || t == "FP16" || t == "BF16") return 2;
  if (t == "INT32" || t == "UINT32" || t == "FP32") return 4;
  if (t == "INT64" || t == "UINT64" || t == "FP64") return 8;
  return 0;
}

absl::StatusOr<std::unique_ptr<KilnClient>> KilnClient::Connect(const ClientOptions& options) {
  // gRPC asserts (aborts) on a metadata value with control characters,
  // e.g. a token read with its newline.
  for (char ch : options.auth_token)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      return absl::InvalidArgumentError(
          "the auth token contains a control character (a newline?); pass the token alone");
  std::unique_ptr<KilnClient> c(new KilnClient());
  c->options_ = options;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_cert_file.empty()) {
      std::ifstream f(options.ca_cert_file, std::ios::binary);
      if (!f) return absl::NotFoundError("cannot read " + options.ca_cert_file);
      std::ostringstream ss;
      ss << f.rdbuf();
      ssl.pem_root_certs = ss.str();
    }
    if (!options.tls_server_name.empty())
      args.SetSslTargetNameOverride(options.tls_server_name);
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  c->channel_ = grpc::CreateCustomChannel(options.address, creds, args);
  c->stub_ = inference::GRPCInferenceService::NewStub(c->channel_);
  c->health_ = grpc::health::v1::Health::NewStub(c->channel_);
  return c;
}

std::unique_ptr<grpc::ClientContext> KilnClient::NewContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  if (!options_.auth_token.empty())
    ctx->AddMetadata("authorization", "Bearer " + options_.auth_token);
  return ctx;
}

absl::StatusOr<bool> KilnClient::ServerLive() {
  inference::ServerLiveRequest req;
  inference::ServerLiveResponse resp;
  auto ctx = NewContext();
  absl::Status s = FromGrpcStatus(stub_->ServerLive(ctx.get(), req, &resp));
  if (!s.ok()) return s;
  return resp.live();
}

absl::StatusOr<bool> KilnClient::ServerReady() {
  inference::ServerReadyRequest req;
  inference::ServerReadyResponse resp;
  auto ctx = NewContext();
  absl::Status s = FromGrpcStatus(stub_->ServerReady(ctx.get(), req, &resp));
  if (!s.ok()) return s;
  return resp.ready();
}

absl::StatusOr<bool> KilnClient::ModelReady(const std::string& model, const std::string& version) {
  inference::ModelReadyRequest req;
  req.set_name(model);
  req.set_version(version);
  inference::ModelReadyResponse resp;
  auto ctx = NewContext();
  absl::Status s = FromGrpcStatus(stub_->ModelReady(ctx.get(), req, &resp));
  if (!s.ok()) return s;
  return resp.ready();
}

absl::StatusOr<std::string> KilnClient::Health(const std::string& service) {
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  auto ctx = NewContext();
  absl::Status s = FromGrpcStatus(health_->Check(ctx.get(), req, &resp));
  if (!s.ok()) return s;
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
}

absl::StatusOr<inference::ServerMetadataResponse> KilnClient::ServerMetadata() {
  inference::ServerMetadataRequest req;
  inference::ServerMetadataResponse resp;
  auto ctx = NewContext();
  absl::Status s = FromGrpcStatus(stub_->ServerMetadata(ctx.get(), req, &resp));
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<inference::ModelMetadataResponse> KilnClient::ModelMetadata(
    const std::string& model, const std::string& version) {
  inference::ModelMetadataRequest req;
  req.set_name(model);
  req.set_version(version);
  inference::ModelMetadataResponse resp;
  auto ctx = NewContext();
  absl::Status s = FromGrpcStatus(stub_->ModelMetadata(ctx.get(), req, &resp));
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<inference::ModelConfigResponse> KilnClient::ModelConfig(const std::string& model,
                                                                       const std::string& version) {
  inference::ModelConfigRequest req;
  req.set_name(model);
  req.set_version(version);
  inference::ModelConfigResponse resp;
  auto ctx = NewContext();
  absl::Status s = FromGrpcStatus(stub_->ModelConfig(ctx.get(), req, &resp));
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<inference::ModelStatisticsResponse> KilnClient::ModelStatistics(
    const std::string& model, const std::string& version) {
  inference::ModelStatisticsRequest req;
  req.set_name(model);
  req.set_version(version);
  inference::ModelStatisticsResponse resp;
  auto ctx = NewContext();
  absl::Status s = FromGrpcStatus(stub_->ModelStatistics(ctx.get(), req, &resp));
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<inference::RepositoryIndexResponse> KilnClient::RepositoryIndex(bool ready_only) {
  inference::RepositoryIndexRequest req;
  req.set_ready(ready_only);
  inference::RepositoryIndexResponse resp;
  auto ctx = NewContext();
  absl::Status s = FromGrpcStatus(stub_->RepositoryIndex(ctx.get(), req, &resp));
  if (!s.ok()) return s;
  return resp;
}

absl::Status KilnClient::LoadModel(const std::string& model) {
  inference::RepositoryModelLoadRequest req;
  req.set_model_name(model);
  inference::RepositoryModelLoadResponse resp;
  auto ctx = NewContext();
  return FromGrpcStatus(stub_->RepositoryModelLoad(ctx.get(), req, &resp));
}

absl::Status KilnClient::UnloadModel(const std::string& model) {
  inference::RepositoryModelUnloadRequest req;
  req.set_model_name(model);
  inference::RepositoryModelUnloadResponse resp;
  auto ctx = NewContext();
  return FromGrpcStatus(stub_->RepositoryModelUnload(ctx.get(), req, &resp));
}

absl::Status KilnClient::InferRaw(const inference::ModelInferRequest& request,
                                  inference::ModelInferResponse* response) {
  auto ctx = NewContext();
  return FromGrpcStatus(stub_->ModelInfer(ctx.get(), request, response));
}

absl::StatusOr<std::vector<ClientTensor>> KilnClient::Infer(const std::string& model,
                                                            const std::vector<ClientTensor>& inputs,
                                                            const InferOptions& options) {
  inference::ModelInferRequest req = BuildInferRequest(model, inputs, options);
  inference::ModelInferResponse resp;
  absl::Status s = InferRaw(req, &resp);
  if (!s.ok()) return s;
  return ParseInferResponse(resp);
}

inference::ModelInferRequest BuildInferRequest(const std::string& model,
                                               const std::vector<ClientTensor>& inputs,
                                               const InferOptions& options) {
  inference::ModelInferRequest req;
  req.set_model_name(model);
  req.set_model_version(options.version);
  req.set_id(options.id);
  if (options.priority > 0) (*req.mutable_parameters())["priority"].set_int64_param(options.priority);
  if (options.timeout_us > 0)
    (*req.mutable_parameters())["timeout"].set_int64_param(options.timeout_us);
  for (const ClientTensor& t : inputs) {
    auto* in = req.add_inputs();
    in->set_name(t.name);
    in->set_datatype(t.datatype);
    for (int64_t d : t.shape) in->add_shape(d);
    req.add_raw_input_contents(t.data);
  }
  for (const std::string& o : options.outputs) req.add_outputs()->set_name(o);
  return req;
}

absl::StatusOr<std::vector<ClientTensor>> ParseInferResponse(
    const inference::ModelInferResponse& resp) {
  std::vector<ClientTensor> out;
  const bool raw = resp.raw_output_contents_size() > 0;
  if (raw && resp.raw_output_contents_size() != resp.outputs_size())
    return absl::DataLossError("response has a raw_output_contents entry count that does not "
                               "match its outputs");
  for (int i = 0; i < resp.outputs_size(); ++i) {
    const auto& o = resp.outputs(i);
    ClientTensor t;
    t.name = o.name();
    t.datatype = o.datatype();
    t.shape.assign(o.shape().begin(), o.shape().end());
    if (raw) {
      t.data = resp.raw_output_contents(i);
    } else {
      const auto& c = o.contents();
      const std::string& dt = t.datatype;
      if (dt == "FP32") AppendValues(c.fp32_contents(), &t.data);
      else if (dt == "FP64") AppendValues(c.fp64_contents(), &t.data);
      else if (dt == "INT64") AppendValues(c.int64_contents(), &t.data);
      else if (dt == "UINT64") AppendValues(c.uint64_contents(), &t.data);
      else if (dt == "INT32") AppendValues(c.int_contents(), &t.data);
      else if (dt == "UINT32") AppendValues(c.uint_contents(), &t.data);
      else if (dt == "INT16") AppendNarrowed<int16_t>(c.int_contents(), &t.data);
      else if (dt == "INT8") AppendNarrowed<int8_t>(c.int_contents(), &t.data);
      else if (dt == "UINT16") AppendNarrowed<uint16_t>(c.uint_contents(), &t.data);
      else if (dt == "UINT8") AppendNarrowed<uint8_t>(c.uint_contents(), &t.data);
      else if (dt == "BOOL") for (bool b : c.bool_contents()) t.data.push_back(b ? 1 : 0);
      else return absl::UnimplementedError("typed output contents of datatype " + dt);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace kiln
