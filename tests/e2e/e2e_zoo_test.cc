// Every model of the zoo (tools/zoo, $KILN_DATA/zoo) served by the real
// kilnd: one repository holds each model once (its highest opset; configs
// derived from the graphs), and each model answers its batch-1 reference
// case over gRPC with onnxruntime's outputs (the same comparison as
// tests/zoo:zoo_test). The server must stay up and serve every model.
// The models are split into kGroups groups (every kGroups-th model by
// name), each served by its own kilnd, so that Bazel's shards run them in
// parallel and no shard compiles the whole zoo.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <iterator>
#include <map>

#include "absl/strings/str_cat.h"
#include "clients/npy.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_util.h"
#include "tests/zoo/zoo_check.h"
#include "tests/zoo/zoo_manifest.h"

namespace kiln::e2e {
namespace {

constexpr char kKilnd[] = "server/kilnd";
constexpr int kGroups = 4;

// The elements of a raw little-endian tensor as doubles.
absl::StatusOr<ZooValues> ToValues(const ClientTensor& t) {
  ZooValues v;
  v.shape = t.shape;
  const std::string& d = t.datatype;
  auto read = [&](auto sample) -> absl::Status {
    using T = decltype(sample);
    if (t.data.size() % sizeof(T) != 0) return absl::InternalError("ragged tensor data");
    size_t n = t.data.size() / sizeof(T);
    v.data.resize(n);
    for (size_t i = 0; i < n; ++i) {
      T x;
      std::memcpy(&x, t.data.data() + i * sizeof(T), sizeof(T));
      v.data[i] = static_cast<double>(x);
    }
    return absl::OkStatus();
  };
  absl::Status s;
  if (d == "FP32") s = read(float{});
  else if (d == "FP64") s = read(double{});
  else if (d == "INT64") s = read(int64_t{});
  else if (d == "INT32") s = read(int32_t{});
  else if (d == "BOOL" || d == "UINT8") s = read(uint8_t{});
  else return absl::UnimplementedError("datatype " + d);
  if (!s.ok()) return s;
  return v;
}

class E2eZooTest : public ::testing::TestWithParam<int> {};

TEST_P(E2eZooTest, EveryZooModelAnswersOverGrpc) {
  const int group = GetParam();
  std::string zoo = ZooDir();
  auto cases = ReadZooManifest(zoo);
  ASSERT_TRUE(cases.ok()) << cases.status();
  // One case per model: batch 1 at the highest opset.
  std::map<std::string, ZooCase> pick;
  for (const ZooCase& c : *cases) {
    if (c.batch != 1) continue;
    auto it = pick.find(c.name);
    if (it == pick.end() || it->second.opset < c.opset) pick[c.name] = c;
  }
  ASSERT_GE(pick.size(), 30u);
  {
    int i = 0;
    for (auto it = pick.begin(); it != pick.end(); ++i)
      it = i % kGroups == group ? std::next(it) : pick.erase(it);
  }
  // The repository: <name>/1/model.onnx and the weights beside it, as links
  // into the zoo (external data is looked up next to the model file).
  std::string repo = TempDir(absl::StrCat("zoo_repo_", group));
  for (const auto& [name, c] : pick) {
    std::string dir = repo + "/" + name;
    ::mkdir(dir.c_str(), 0755);
    ::mkdir((dir + "/1").c_str(), 0755);
    std::string model = zoo + "/" + c.model;
    std::string weights = model.substr(0, model.rfind('/')) + "/weights.bin";
    ASSERT_EQ(::symlink(model.c_str(), (dir + "/1/model.onnx").c_str()), 0) << dir;
    struct stat st;
    if (::stat(weights.c_str(), &st) == 0) {
      ASSERT_EQ(::symlink(weights.c_str(), (dir + "/1/weights.bin").c_str()), 0) << dir;
    }
  }
  auto p = KilnProcess::Start(kKilnd, {"--model-repository=" + repo, "--exit-on-error"},
                              absl::Seconds(600));
  ASSERT_TRUE(p.ok()) << p.status();
  auto client = (*p)->Client("", absl::Seconds(600));
  int answered = 0;
  for (const auto& [name, c] : pick) {
    std::vector<ClientTensor> ins;
    for (const auto& [in_name, path] : c.inputs) {
      auto t = ReadNpyTensor(zoo + "/" + path);
      ASSERT_TRUE(t.ok()) << t.status();
      t->name = in_name;
      ins.push_back(std::move(*t));
    }
    auto outs = client->Infer(name, ins);
    EXPECT_TRUE(outs.ok()) << name << ": " << outs.status();
    if (!outs.ok()) continue;
    ASSERT_EQ(outs->size(), c.outputs.size()) << name;
    for (size_t i = 0; i < outs->size(); ++i) {
      const ClientTensor& got = (*outs)[i];
      EXPECT_EQ(got.name, c.outputs[i].first) << name;
      auto want = ReadNpyTensor(zoo + "/" + c.outputs[i].second);
      ASSERT_TRUE(want.ok()) << want.status();
      auto g = ToValues(got);
      auto w = ToValues(*want);
      ASSERT_TRUE(g.ok() && w.ok()) << name << ": " << g.status() << " " << w.status();
      bool argmax = false;
      for (const auto& [kind, index] : c.checks)
        argmax |= kind == "argmax" && index == static_cast<int>(i);
      CompareResult r;
      absl::Status cmp = CompareOutput(got.name, *g, *w, c.atol, c.rtol, argmax, &r);
      EXPECT_TRUE(cmp.ok()) << name << ": " << cmp.message();
    }
    ++answered;
  }
  EXPECT_EQ(answered, static_cast<int>(pick.size()));
  EXPECT_TRUE(client->ServerLive().ok());
  (*p)->Signal(SIGTERM);
  EXPECT_EQ(*(*p)->Wait(absl::Seconds(60)), 0);
}

INSTANTIATE_TEST_SUITE_P(Groups, E2eZooTest, ::testing::Range(0, kGroups));

}  // namespace
}  // namespace kiln::e2e
