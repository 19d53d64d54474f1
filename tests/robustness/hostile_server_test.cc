// kilnd (the real binary) with a repository of malformed and hostile models
// and hostile requests: a bad model's load fails and leaves it UNAVAILABLE
// with its reason in the repository index (never stuck in LOADING), a
// hostile request gets INVALID_ARGUMENT / RESOURCE_EXHAUSTED / INTERNAL with
// a useful message, and the server keeps serving every other model.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_util.h"
#include "tests/robustness/hostile_models.h"
#include "tests/robustness/subprocess.h"

namespace kiln::hostile {
namespace {

using ::testing::HasSubstr;

constexpr char kKilnd[] = "server/kilnd";

// A model that runs ConstantOfShape([1e6, 1e6]) in its warm-up: the load
// itself meets a hostile size.
constexpr char kWarmupConfig[] = R"pb(
  max_batch_size: 0
  model_warmup [ {
    name: "zeros"
    batch_size: 1
    inputs { key: "X" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
  } ]
)pb";

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A script that starts kilnd under an address-space limit (KilnProcess
// execs it with kilnd's arguments).
std::string LimitedKilnd() {
  char cwd[PATH_MAX];
  std::string here = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
  std::string path = e2e::TempDir("bin") + "/kilnd_limited";
  const std::string limit =
      kChildAddressSpace > 0 ? absl::StrCat("ulimit -v ", kChildAddressSpace >> 10, "\n") : "";
  EXPECT_TRUE(WriteFile(path, absl::StrCat("#!/bin/sh\n", limit, "exec ", here, "/", kKilnd,
                                           " \"$@\"\n"))
                  .ok());
  ::chmod(path.c_str(), 0755);
  return path;
}

ClientTensor ToClient(const std::string& name, const HostTensor& h) {
  return ClientTensor{name, DatatypeOf(h.dtype), std::vector<int64_t>(h.shape.begin(), h.shape.end()),
                      std::string(h.data.begin(), h.data.end())};
}

class HostileServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto repo = e2e::MakeRepo("hostile_repo", {});
    ASSERT_TRUE(repo.ok()) << repo.status();
    repo_ = new std::string(*repo);
    for (const HostileCase& c : LoadCases()) Add(c);
    for (const HostileCase& c : RunCases()) Add(c);
    for (const RequestModel& r : RequestModels()) {
      HostileCase c;
      c.name = r.name;
      c.model = r.model;
      Add(c);
    }
    // config.pbtxt that is /dev/zero or a FIFO, next to a good model.
    std::string simple = ReadAll("models/simple/1/model.onnx");
    for (const char* kind : {"/dev/zero", "fifo"}) {
      HostileCase c;
      c.name = std::string(kind) == "fifo" ? "cfg_fifo" : "cfg_dev_zero";
      c.model = simple;
      Add(c);
      ASSERT_TRUE(MakeSpecialFile(*repo_ + "/" + c.name + "/config.pbtxt", kind).ok());
    }
    {  // The warm-up bomb.
      HostileCase c;
      c.name = "warm_cos";
      for (const HostileCase& r : RunCases())
        if (r.name == "cos_init_big") c.model = r.model;
      Add(c);
      ASSERT_TRUE(WriteFile(*repo_ + "/warm_cos/config.pbtxt", kWarmupConfig).ok());
    }
    kilnd_path_ = new std::string(LimitedKilnd());
    auto p = e2e::KilnProcess::Start(*kilnd_path_,
                                     {"--model-repository=" + *repo_, "--exit-timeout=5"},
                                     absl::Seconds(300));
    ASSERT_TRUE(p.ok()) << p.status();
    kilnd_ = p->release();
  }

  static void TearDownTestSuite() {
    if (kilnd_) {
      kilnd_->Signal(SIGTERM);
      auto code = kilnd_->Wait(absl::Seconds(30));
      EXPECT_TRUE(code.ok() && *code == 0) << "kilnd did not exit cleanly";
      delete kilnd_;
      kilnd_ = nullptr;
    }
  }

  static void Add(const HostileCase& c) {
    std::string dir = *repo_ + "/" + c.name;
    ::mkdir(dir.c_str(), 0755);
    ASSERT_TRUE(WriteCase(c, dir + "/1").ok()) << c.name;
  }

  // The repository index entry of `name`.
  static inference::RepositoryIndexResponse::ModelIndex Entry(KilnClient* client,
                                                             const std::string& name) {
    auto index = client->RepositoryIndex(false);
    EXPECT_TRUE(index.ok()) << index.status();
    if (index.ok())
      for (const auto& m : index->models())
        if (m.name() == name) return m;
    ADD_FAILURE() << name << " is not in the index";
    return {};
  }

  // `feeds`, plus zeros for the model's other (static-shaped) inputs.
  static std::vector<ClientTensor> Inputs(KilnClient* client, const std::string& model,
                                          const std::vector<Feed>& feeds) {
    std::vector<ClientTensor> out;
    auto meta = client->ModelMetadata(model);
    EXPECT_TRUE(meta.ok()) << model << ": " << meta.status();
    if (!meta.ok()) return out;
    for (const auto& in : meta->inputs()) {
      const Feed* f = nullptr;
      for (const Feed& x : feeds)
        if (x.name == in.name()) f = &x;
      if (f) {
        out.push_back(ToClient(in.name(), f->value));
        continue;
      }
      ClientTensor t{in.name(), in.datatype(), {in.shape().begin(), in.shape().end()}, ""};
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      t.data.assign(static_cast<size_t>(n) * DatatypeSize(t.datatype), '\0');
      out.push_back(t);
    }
    return out;
  }

  // `simple` still answers correctly.
  static void ExpectSimpleServes(KilnClient* client) {
    std::vector<float> a(16, 1.5f), b(16, 2.0f);
    auto outs = client->Infer("simple", {e2e::FloatTensor("INPUT0", a, {1, 16}),
                                         e2e::FloatTensor("INPUT1", b, {1, 16})});
    ASSERT_TRUE(outs.ok()) << "simple stopped serving: " << outs.status();
    ASSERT_EQ(outs->size(), 2u);
    EXPECT_FLOAT_EQ(e2e::Floats((*outs)[0])[0], 3.5f);
  }

  static void ExpectHostileError(const absl::Status& s, const std::string& error) {
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(s.code() == absl::StatusCode::kInvalidArgument ||
                s.code() == absl::StatusCode::kResourceExhausted ||
                s.code() == absl::StatusCode::kInternal)
        << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(error)) << s;
  }

  static std::string* repo_;
  static std::string* kilnd_path_;
  static e2e::KilnProcess* kilnd_;
};

std::string* HostileServerTest::repo_ = nullptr;
std::string* HostileServerTest::kilnd_path_ = nullptr;
e2e::KilnProcess* HostileServerTest::kilnd_ = nullptr;

TEST_F(HostileServerTest, BadModelsAreUnavailableWithTheirReason) {
  ASSERT_NE(kilnd_, nullptr);
  auto client = kilnd_->Client("", absl::Seconds(60));
  std::vector<std::pair<std::string, std::string>> want;  // name, reason
  for (const HostileCase& c : LoadCases()) want.push_back({c.name, c.error});
  want.push_back({"cfg_dev_zero", "not a regular file"});
  want.push_back({"cfg_fifo", "not a regular file"});
  want.push_back({"warm_cos", "memory"});
  for (const auto& [name, reason] : want) {
    SCOPED_TRACE(name);
    auto e = Entry(client.get(), name);
    EXPECT_EQ(e.state(), "UNAVAILABLE");
    EXPECT_THAT(e.reason(), HasSubstr(reason));
    auto ready = client->ModelReady(name);
    EXPECT_TRUE(ready.ok() && !*ready) << name;
  }
  for (const HostileCase& c : RunCases()) EXPECT_EQ(Entry(client.get(), c.name).state(), "READY") << c.name;
  for (const RequestModel& r : RequestModels())
    EXPECT_EQ(Entry(client.get(), r.name).state(), "READY") << r.name;
  ExpectSimpleServes(client.get());
}

TEST_F(HostileServerTest, HostileShapesInModels) {
  ASSERT_NE(kilnd_, nullptr);
  auto client = kilnd_->Client("", absl::Seconds(120));
  for (const HostileCase& c : RunCases()) {
    SCOPED_TRACE(c.name);
    auto outs = client->Infer(c.name, Inputs(client.get(), c.name, c.feeds));
    if (c.expect == HostileCase::Expect::kOk) {
      EXPECT_TRUE(outs.ok()) << outs.status();
    } else {
      ExpectHostileError(outs.status(), c.error);
    }
    ExpectSimpleServes(client.get());
  }
}

TEST_F(HostileServerTest, HostileShapesInRequests) {
  ASSERT_NE(kilnd_, nullptr);
  auto client = kilnd_->Client("", absl::Seconds(120));
  for (const RequestModel& r : RequestModels()) {
    SCOPED_TRACE(r.name);
    auto good = client->Infer(r.name, Inputs(client.get(), r.name, r.good));
    EXPECT_TRUE(good.ok()) << good.status();
    for (const RequestModel::Bad& b : r.bad) {
      SCOPED_TRACE(b.what);
      auto outs = client->Infer(r.name, Inputs(client.get(), r.name, b.feeds));
      ExpectHostileError(outs.status(), b.error);
      ExpectSimpleServes(client.get());
    }
    // The model itself still serves after its hostile requests.
    auto again = client->Infer(r.name, Inputs(client.get(), r.name, r.good));
    EXPECT_TRUE(again.ok()) << again.status();
  }
  auto live = client->ServerLive();
  EXPECT_TRUE(live.ok() && *live);
}

// Explicit model control: a failed RepositoryModelLoad answers with the
// reason (never UNKNOWN) and leaves the model UNAVAILABLE, never LOADING;
// other loads are not blocked.
TEST_F(HostileServerTest, ExplicitLoadsFailCleanly) {
  ASSERT_NE(kilnd_path_, nullptr);
  auto p = e2e::KilnProcess::Start(*kilnd_path_,
                                   {"--model-repository=" + *repo_, "--exit-timeout=5",
                                    "--model-control-mode=explicit"});
  ASSERT_TRUE(p.ok()) << p.status();
  auto client = (*p)->Client("", absl::Seconds(120));
  for (const char* name :
       {"warm_cos", "model_fifo", "model_dev_zero", "ext_fifo", "cycle", "truncated",
        "unknown_op", "cfg_dev_zero", "cfg_fifo", "nested_too_deep"}) {
    SCOPED_TRACE(name);
    absl::Status s = client->LoadModel(name);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.code(), absl::StatusCode::kUnknown) << s;
    EXPECT_NE(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    auto e = Entry(client.get(), name);
    EXPECT_EQ(e.state(), "UNAVAILABLE");
    EXPECT_FALSE(e.reason().empty());
    EXPECT_THAT(e.reason(), HasSubstr(std::string(s.message()).substr(0, 20)));
  }
  ASSERT_TRUE(client->LoadModel("simple").ok());
  ExpectSimpleServes(client.get());
  (*p)->Signal(SIGTERM);
  auto code = (*p)->Wait(absl::Seconds(30));
  EXPECT_TRUE(code.ok() && *code == 0);
}

}  // namespace
}  // namespace kiln::hostile
