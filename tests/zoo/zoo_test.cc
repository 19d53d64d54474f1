// The model zoo (tools/zoo: torchvision / torch architectures with seeded
// random weights, exported by Debian's torch) through kiln's CPU device,
// compared with onnxruntime-node's outputs on the same inputs. Every line of
// $KILN_DATA/zoo/manifest.tsv is one gtest case ("resnet18_op17_b8"); the
// target is sharded, and consecutive cases of one model share its load.
// `--set=ops` runs the operation zoo ($KILN_DATA/ops, tools/zoo/export_ops.py)
// instead (//tests/zoo:ops_test).
// `--jit` runs each case through a Jit three times (plain, capture, replay)
// and checks the replay's outputs (//tests/zoo:zoo_jit_test, on 2 threads:
// batches built in groups of slices and bidirectional RNNs replay their
// independent chains side by side, engine/jit/parallel.h).
// A missing zoo fails (tools/fetch_testdata makes it; tools/test runs that).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/jit/jit.h"
#include "engine/onnx/model.h"
#include "engine/onnx/npy.h"
#include "engine/tensor/test_util.h"
#include "tests/zoo/zoo_check.h"
#include "tests/zoo/zoo_manifest.h"

namespace kiln {
namespace {

bool use_jit = false;  // --jit

struct Loaded {
  std::string path;
  std::unique_ptr<OnnxModel> model;
};

Loaded& LastModel() {
  static Loaded* l = new Loaded();
  return *l;
}

absl::StatusOr<ZooValues> ToValues(const HostTensor& h) {
  ZooValues v;
  v.shape = h.shape;
  v.data = h.Doubles();
  return v;
}

class ZooCaseTest : public ::testing::Test {
 public:
  ZooCaseTest(std::string dir, ZooCase c) : dir_(std::move(dir)), c_(std::move(c)) {}

  void TestBody() override {
    Engine* e = TestEngine();
    Loaded& l = LastModel();
    std::string path = dir_ + "/" + c_.model;
    if (l.path != path) {
      l.model.reset();
      auto m = OnnxModel::Load(path, e, "CPU");
      ASSERT_TRUE(m.ok()) << m.status();
      l.model = std::move(*m);
      l.path = path;
    }
    const OnnxModel& model = *l.model;
    ASSERT_EQ(model.inputs().size(), c_.inputs.size());
    std::vector<Tensor> ins;
    for (size_t i = 0; i < c_.inputs.size(); ++i) {
      ASSERT_EQ(model.inputs()[i].name, c_.inputs[i].first) << "input order";
      auto h = ReadNpy(dir_ + "/" + c_.inputs[i].second);
      ASSERT_TRUE(h.ok()) << h.status();
      ins.push_back(h->ToTensor(e, "CPU"));
    }
    auto start = std::chrono::steady_clock::now();
    Jit jit([&model](const std::vector<Tensor>& in) { return model.Run(in); });
    absl::StatusOr<std::vector<Tensor>> outs;
    for (int call = 0; call < (use_jit ? 3 : 1); ++call) {
      outs = use_jit ? jit(ins) : model.Run(ins);
      ASSERT_TRUE(outs.ok()) << outs.status();
      std::vector<Tensor*> ptrs;
      for (Tensor& t : *outs) ptrs.push_back(&t);
      absl::Status st = Tensor::RealizeAll(ptrs);
      ASSERT_TRUE(st.ok()) << st;
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
    if (use_jit) {
      EXPECT_EQ(jit.stats().replays, 1u) << "the third call replays";
    }
    ASSERT_EQ(outs->size(), c_.outputs.size());
    double max_err = 0;
    for (size_t i = 0; i < outs->size(); ++i) {
      auto got = ReadBack((*outs)[i]);
      ASSERT_TRUE(got.ok()) << got.status();
      auto want = ReadNpy(dir_ + "/" + c_.outputs[i].second);
      ASSERT_TRUE(want.ok()) << want.status();
      bool argmax = false;
      for (const auto& [kind, index] : c_.checks)
        argmax |= kind == "argmax" && index == static_cast<int>(i);
      CompareResult r;
      absl::Status cmp = CompareOutput(c_.outputs[i].first, *ToValues(*got), *ToValues(*want),
                                       c_.atol, c_.rtol, argmax, &r);
      EXPECT_TRUE(cmp.ok()) << c_.Id() << ": " << cmp.message();
      max_err = std::max(max_err, r.max_abs_err);
    }
    std::string batch;
    if (std::optional<BatchSplitter::Choice> b = model.BatchChoice(ins))
      batch = b->images < b->batch ? absl::StrCat(", in slices of ", b->images, " images")
                                   : ", the batch whole";
    if (use_jit && jit.stats().parallel_replays > 0) batch += ", replayed side by side";
    std::printf("zoo %s: max abs error %.3g, %s %.0f ms (with compiles; ORT %.1f ms)%s\n",
                c_.Id().c_str(), max_err, use_jit ? "three calls" : "first run", ms, c_.ort_ms,
                batch.c_str());
  }

 private:
  std::string dir_;
  ZooCase c_;
};

void RegisterZoo(const std::string& set) {
  std::string dir = ZooDir(set);
  auto cases = ReadZooManifest(dir);
  if (!cases.ok()) {
    std::string msg(cases.status().message());
    ::testing::RegisterTest(set.c_str(), "manifest", nullptr, nullptr, __FILE__, __LINE__,
                            [msg]() -> ::testing::Test* {
                              struct Missing : ::testing::Test {
                                explicit Missing(std::string m) : m_(std::move(m)) {}
                                void TestBody() override { FAIL() << m_; }
                                std::string m_;
                              };
                              return new Missing(msg);
                            });
    return;
  }
  for (const ZooCase& c : *cases)
    ::testing::RegisterTest(set.c_str(), c.Id().c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [dir, c]() -> ::testing::Test* { return new ZooCaseTest(dir, c); });
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string set = "zoo";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--set=", 6) == 0) set = argv[i] + 6;
    else if (std::strcmp(argv[i], "--jit") == 0) kiln::use_jit = true;
  kiln::RegisterZoo(set);
  return RUN_ALL_TESTS();
}
