// End to end, issue 14.2: Triton's system shared-memory extension over gRPC
// on the real kilnd. Regions are POSIX shm objects this test creates as a
// client would (ClientShm); kilnd maps them, reads inputs from them and
// writes outputs into them.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_util.h"

namespace kiln::e2e {
namespace {

using ::testing::HasSubstr;

constexpr char kKilnd[] = "server/kilnd";
constexpr int kRows = 3;
constexpr uint64_t kTensorBytes = kRows * 16 * sizeof(float);  // 192

std::vector<ClientTensor> Inputs(float base) {
  std::vector<float> a(kRows * 16), b(kRows * 16);
  for (int i = 0; i < kRows * 16; ++i) {
    a[i] = base + static_cast<float>(i) - 8;
    b[i] = 0.5f * static_cast<float>(i % 5) - 1;
  }
  return {FloatTensor("INPUT0", a, {kRows, 16}), FloatTensor("INPUT1", b, {kRows, 16})};
}

// Unique across runs (tests may run in a PID namespace where getpid() repeats).
std::string Key(const std::string& what) {
  return absl::StrCat("/kiln_e2e_", what, "_", getpid(), "_", absl::ToUnixMicros(absl::Now()));
}

void StopKilnd(KilnProcess*& kilnd) {
  if (kilnd == nullptr) return;
  kilnd->Signal(SIGTERM);
  auto code = kilnd->Wait(absl::Seconds(30));
  EXPECT_TRUE(code.ok() && *code == 0) << "kilnd did not exit cleanly";
  delete kilnd;
  kilnd = nullptr;
}

class E2eShmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // `slow` holds a lone request in its queue for 1.5 s.
    auto repo = MakeRepo("shm_repo", {{"slow", SimpleBatchedConfig(1500000, true)}});
    ASSERT_TRUE(repo.ok()) << repo.status();
    auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + *repo, "--exit-timeout=5",
                                         "--shm-allow=/kiln_e2e_,/kiln_other_",
                                         "--shm-max-regions=8"});
    ASSERT_TRUE(p.ok()) << p.status();
    kilnd_ = p->release();
  }
  static void TearDownTestSuite() { StopKilnd(kilnd_); }
  void SetUp() override {
    ASSERT_NE(kilnd_, nullptr);
    client_ = kilnd_->Client();
  }
  void TearDown() override {
    if (client_) {
      EXPECT_TRUE(client_->UnregisterSystemSharedMemory().ok());
    }
  }
  // A 4 KiB object registered as region `name`.
  std::unique_ptr<ClientShm> Region(const std::string& name) {
    auto shm = ClientShm::Create(Key(name), 4096);
    EXPECT_TRUE(shm.ok()) << shm.status();
    if (!shm.ok()) return nullptr;
    absl::Status s = client_->RegisterSystemSharedMemory(name, (*shm)->key(), 4096);
    EXPECT_TRUE(s.ok()) << s;
    return *std::move(shm);
  }
  // Both inputs at 0 / 192 and both outputs at 512 / 768 of region "io".
  inference::ModelInferRequest ShmRequest(const std::string& model, ClientShm* shm,
                                          const std::vector<ClientTensor>& in) {
    inference::ModelInferRequest req = BuildInferRequest(model, in, {});
    for (int k = 0; k < 2; ++k) {
      std::memcpy(shm->data() + k * kTensorBytes, in[k].data.data(), kTensorBytes);
      absl::Status s = SetInputSharedMemory(&req, in[k].name, "io", kTensorBytes, k * kTensorBytes);
      EXPECT_TRUE(s.ok()) << s;
    }
    SetOutputSharedMemory(&req, "OUTPUT0", "io", 256, 512);
    SetOutputSharedMemory(&req, "OUTPUT1", "io", 256, 768);
    return req;
  }
  static KilnProcess* kilnd_;
  std::unique_ptr<KilnClient> client_;
};
KilnProcess* E2eShmTest::kilnd_ = nullptr;

TEST_F(E2eShmTest, RegisterStatusUnregister) {
  auto meta = client_->ServerMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_THAT(meta->extensions(), ::testing::Contains("system_shared_memory"));
  auto shm = ClientShm::Create(Key("status"), 8192);
  ASSERT_TRUE(shm.ok()) << shm.status();
  ASSERT_TRUE(client_->RegisterSystemSharedMemory("a", (*shm)->key(), 100, 4000).ok());
  ASSERT_TRUE(client_->RegisterSystemSharedMemory("b", (*shm)->key(), 8192).ok());
  EXPECT_EQ(client_->RegisterSystemSharedMemory("a", (*shm)->key(), 8).code(),
            absl::StatusCode::kAlreadyExists);
  auto all = client_->SystemSharedMemoryStatus();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->regions_size(), 2);
  const auto& a = all->regions().at("a");
  EXPECT_EQ(a.name(), "a");
  EXPECT_EQ(a.key(), (*shm)->key());
  EXPECT_EQ(a.offset(), 4000u);
  EXPECT_EQ(a.byte_size(), 100u);
  auto one = client_->SystemSharedMemoryStatus("b");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->regions_size(), 1);
  EXPECT_EQ(client_->SystemSharedMemoryStatus("zz").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->UnregisterSystemSharedMemory("zz").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(client_->UnregisterSystemSharedMemory("a").ok());
  EXPECT_EQ(client_->SystemSharedMemoryStatus()->regions_size(), 1);
  ASSERT_TRUE(client_->UnregisterSystemSharedMemory().ok());
  EXPECT_EQ(client_->SystemSharedMemoryStatus()->regions_size(), 0);
}

TEST_F(E2eShmTest, RegistrationErrors) {
  auto code = [](const absl::Status& s) { return s.code(); };
  auto shm = ClientShm::Create(Key("reg"), 4096);
  ASSERT_TRUE(shm.ok());
  // Past the object's end, overflowing, empty.
  EXPECT_EQ(code(client_->RegisterSystemSharedMemory("r", (*shm)->key(), 4097)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(client_->RegisterSystemSharedMemory("r", (*shm)->key(), 16, ~uint64_t{0} - 8)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(client_->RegisterSystemSharedMemory("r", (*shm)->key(), 0)),
            absl::StatusCode::kInvalidArgument);
  // Keys: malformed, not allowed, allowed but absent.
  EXPECT_EQ(code(client_->RegisterSystemSharedMemory("r", "/kiln_e2e_x/../y", 16)),
            absl::StatusCode::kInvalidArgument);
  auto other = ClientShm::Create(absl::StrCat("/kiln_denied_", getpid(), "_",
                                              absl::ToUnixMicros(absl::Now())),
                                 4096);
  ASSERT_TRUE(other.ok());
  absl::Status denied = client_->RegisterSystemSharedMemory("r", (*other)->key(), 16);
  EXPECT_EQ(code(denied), absl::StatusCode::kPermissionDenied) << denied;
  EXPECT_THAT(denied.message(), HasSubstr("not allowed"));
  EXPECT_EQ(code(client_->RegisterSystemSharedMemory("r", Key("absent"), 16)),
            absl::StatusCode::kNotFound);
  // At most --shm-max-regions=8.
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(client_->RegisterSystemSharedMemory(absl::StrCat("r", i), (*shm)->key(), 16).ok());
  EXPECT_EQ(code(client_->RegisterSystemSharedMemory("r8", (*shm)->key(), 16)),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(E2eShmTest, InputsAndOutputsInSharedMemoryMatchInline) {
  auto in = Inputs(1);
  auto inline_out = client_->Infer("simple", in);
  ASSERT_TRUE(inline_out.ok()) << inline_out.status();
  auto shm = Region("io");
  ASSERT_NE(shm, nullptr);
  inference::ModelInferRequest req = ShmRequest("simple", shm.get(), in);
  EXPECT_EQ(req.raw_input_contents_size(), 0);
  inference::ModelInferResponse resp;
  absl::Status s = client_->InferRaw(req, &resp);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(resp.outputs_size(), 2);
  for (int k = 0; k < 2; ++k) {
    const auto& o = resp.outputs(k);
    EXPECT_EQ(o.shape_size(), 2);
    EXPECT_EQ(o.parameters().at("shared_memory_region").string_param(), "io");
    EXPECT_EQ(o.parameters().at("shared_memory_byte_size").int64_param(), 256);
    EXPECT_TRUE(resp.raw_output_contents(k).empty());
    const std::string& want = (*inline_out)[k].data;
    ASSERT_EQ(want.size(), kTensorBytes);
    EXPECT_EQ(std::string(shm->data() + 512 + 256 * k, kTensorBytes), want) << o.name();
  }
  // The same through ModelStreamInfer (outputs at 1024 / 1280 this time).
  std::memset(shm->data() + 512, 0, 1024);
  SetOutputSharedMemory(&req, "OUTPUT0", "io", 256, 1024);
  SetOutputSharedMemory(&req, "OUTPUT1", "io", 256, 1280);
  {
    grpc::ClientContext ctx;
    auto stream = client_->stub()->ModelStreamInfer(&ctx);
    ASSERT_TRUE(stream->Write(req));
    stream->WritesDone();
    inference::ModelStreamInferResponse sr;
    ASSERT_TRUE(stream->Read(&sr));
    EXPECT_TRUE(sr.error_message().empty()) << sr.error_message();
    EXPECT_EQ(sr.infer_response().outputs(1).parameters().at("shared_memory_offset").int64_param(),
              1280);
    EXPECT_TRUE(stream->Finish().ok());
    for (int k = 0; k < 2; ++k)
      EXPECT_EQ(std::string(shm->data() + 1024 + 256 * k, kTensorBytes), (*inline_out)[k].data);
  }
  // Mixed: INPUT0 from the region, INPUT1 raw (raw_input_contents skips
  // the shared-memory input, as Triton's clients send it), outputs inline.
  inference::ModelInferRequest mixed = BuildInferRequest("simple", in, {});
  ASSERT_TRUE(SetInputSharedMemory(&mixed, "INPUT0", "io", kTensorBytes).ok());
  ASSERT_EQ(mixed.raw_input_contents_size(), 1);
  auto out = ParseInferResponse([&] {
    inference::ModelInferResponse r;
    EXPECT_TRUE(client_->InferRaw(mixed, &r).ok());
    return r;
  }());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].data, (*inline_out)[0].data);
  EXPECT_EQ((*out)[1].data, (*inline_out)[1].data);
}

TEST_F(E2eShmTest, BadReferencesAreRefused) {
  auto shm = Region("io");
  ASSERT_NE(shm, nullptr);
  auto in = Inputs(2);
  inference::ModelInferResponse resp;
  auto expect = [&](inference::ModelInferRequest req, absl::StatusCode want,
                    const std::string& text) {
    absl::Status s = client_->InferRaw(req, &resp);
    EXPECT_EQ(s.code(), want) << s;
    EXPECT_THAT(s.message(), HasSubstr(text));
  };
  // Offset past the region.
  inference::ModelInferRequest req = ShmRequest("simple", shm.get(), in);
  ASSERT_TRUE(SetInputSharedMemory(&req, "INPUT0", "io", kTensorBytes, 4000).ok());
  expect(req, absl::StatusCode::kInvalidArgument, "outside region 'io'");
  // byte_size that is not the tensor's.
  req = ShmRequest("simple", shm.get(), in);
  ASSERT_TRUE(SetInputSharedMemory(&req, "INPUT1", "io", kTensorBytes - 4).ok());
  expect(req, absl::StatusCode::kInvalidArgument, "input 'INPUT1': shared_memory_byte_size");
  // An output slice too small for the output.
  req = ShmRequest("simple", shm.get(), in);
  SetOutputSharedMemory(&req, "OUTPUT1", "io", 64, 768);
  expect(req, absl::StatusCode::kInvalidArgument, "output 'OUTPUT1' has 192 bytes");
  // An unknown region.
  req = ShmRequest("simple", shm.get(), in);
  SetOutputSharedMemory(&req, "OUTPUT0", "nope", 256);
  expect(req, absl::StatusCode::kNotFound, "no shared-memory region 'nope'");
  // The server keeps serving.
  auto ok = client_->Infer("simple", in);
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST_F(E2eShmTest, AShrunkObjectFailsTheRequestNotTheServer) {
  auto shm = Region("io");
  ASSERT_NE(shm, nullptr);
  inference::ModelInferRequest req = ShmRequest("simple", shm.get(), Inputs(3));
  ASSERT_EQ(truncate(absl::StrCat("/dev/shm", shm->key()).c_str(), 0), 0);
  inference::ModelInferResponse resp;
  absl::Status s = client_->InferRaw(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("shrank"));
  EXPECT_TRUE(kilnd_->Running());
  EXPECT_TRUE(client_->Infer("simple", Inputs(3)).ok());
}

TEST_F(E2eShmTest, UnregisterWhileARequestIsInFlight) {
  auto shm = Region("io");
  ASSERT_NE(shm, nullptr);
  auto in = Inputs(4);
  auto want = client_->Infer("simple", in);
  ASSERT_TRUE(want.ok());
  inference::ModelInferRequest req = ShmRequest("slow", shm.get(), in);
  absl::Status result;
  inference::ModelInferResponse resp;
  std::thread t([&] { result = client_->InferRaw(req, &resp); });
  absl::SleepFor(absl::Milliseconds(400));  // queued in `slow` for 1.5 s
  // The client takes everything away: the region, then its object.
  ASSERT_TRUE(client_->UnregisterSystemSharedMemory("io").ok());
  EXPECT_EQ(client_->SystemSharedMemoryStatus()->regions_size(), 0);
  ASSERT_EQ(shm_unlink(shm->key().c_str()), 0);  // only the mappings are left
  char* data = shm->data();
  std::string before(data + 512, kTensorBytes);
  t.join();
  // The request completes (its output went to the still-mapped pages).
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(std::string(data + 512, kTensorBytes), (*want)[0].data);
  EXPECT_NE(before, (*want)[0].data);
  shm.reset();
  EXPECT_TRUE(kilnd_->Running());
  auto again = client_->Infer("simple", in);
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST(E2eShmDisabledTest, SharedMemoryIsOffByDefault) {
  auto repo = MakeRepo("shm_off_repo", {});
  ASSERT_TRUE(repo.ok()) << repo.status();
  auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + *repo, "--exit-timeout=5"});
  ASSERT_TRUE(p.ok()) << p.status();
  KilnProcess* kilnd = p->release();
  auto client = kilnd->Client();
  auto meta = client->ServerMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_THAT(meta->extensions(), ::testing::Not(::testing::Contains("system_shared_memory")));
  auto shm = ClientShm::Create(Key("off"), 4096);
  ASSERT_TRUE(shm.ok());
  absl::Status s = client->RegisterSystemSharedMemory("io", (*shm)->key(), 4096);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("--shm-allow"));
  inference::ModelInferRequest req = BuildInferRequest("simple", Inputs(0), {});
  ASSERT_TRUE(SetInputSharedMemory(&req, "INPUT0", "io", kTensorBytes).ok());
  inference::ModelInferResponse resp;
  s = client->InferRaw(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(client->SystemSharedMemoryStatus()->regions_size(), 0);
  client.reset();
  StopKilnd(kilnd);
}

}  // namespace
}  // namespace kiln::e2e
