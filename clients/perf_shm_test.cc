// `kiln perf --shared-memory system` against a fake transport that plays a
// shared-memory server: it maps the regions perf registers, reads each
// request's inputs from them and writes the outputs into them. Checks the
// layout, the output sizes (metadata, probe, override), one region per
// worker, the data in it, and that nothing is left registered or in
// /dev/shm after a run, a refused registration or a signal's cleanup.
#include "clients/perf_shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Objects in /dev/shm whose name starts with `prefix`.
std::set<std::string> ShmObjects(const std::string& prefix) {
  std::set<std::string> out;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d))
    if (absl::StartsWith(e->d_name, prefix)) out.insert(e->d_name);
  closedir(d);
  return out;
}

std::string OurPrefix() { return absl::StrCat("kiln_perf_", getpid(), "_"); }

// Model: X FP32 [-1, 4] -> DOUBLE FP32 [-1, 4] (= 2 X) and, unless `fixed`,
// ROWS INT64 [-1, -1] ([rows, 3], known only from an inference).
class FakeShmServer : public PerfTransport {
 public:
  explicit FakeShmServer(bool fixed = true, bool refuse = false)
      : fixed_(fixed), refuse_(refuse) {}
  ~FakeShmServer() override {
    for (auto& [name, r] : regions_) munmap(r.first, r.second);
  }
  Protocol protocol() const override { return Protocol::kGrpc; }
  absl::StatusOr<inference::ModelMetadataResponse> ModelMetadata(const std::string&,
                                                                 const std::string&) override {
    inference::ModelMetadataResponse m;
    auto* x = m.add_inputs();
    x->set_name("X");
    x->set_datatype("FP32");
    x->add_shape(-1);
    x->add_shape(4);
    auto* y = m.add_outputs();
    y->set_name("DOUBLE");
    y->set_datatype("FP32");
    y->add_shape(-1);
    y->add_shape(4);
    if (!fixed_) {
      auto* z = m.add_outputs();
      z->set_name("ROWS");
      z->set_datatype("INT64");
      z->add_shape(-1);
      z->add_shape(-1);
    }
    return m;
  }
  absl::StatusOr<inference::ModelConfigResponse> ModelConfig(const std::string&,
                                                             const std::string&) override {
    inference::ModelConfigResponse c;
    c.mutable_config()->set_max_batch_size(8);
    return c;
  }
  absl::StatusOr<inference::ModelStatisticsResponse> Statistics(const std::string&,
                                                                const std::string&) override {
    return inference::ModelStatisticsResponse();
  }
  absl::StatusOr<inference::ModelInferResponse> InferOnce(
      const inference::ModelInferRequest& request) override {
    ++probes_;
    const int64_t rows = request.inputs(0).shape(0);
    inference::ModelInferResponse r;
    auto* a = r.add_outputs();
    a->set_name("DOUBLE");
    r.add_raw_output_contents(std::string(rows * 4 * 4, '\0'));
    auto* b = r.add_outputs();
    b->set_name("ROWS");
    r.add_raw_output_contents(std::string(rows * 3 * 8, '\0'));
    return r;
  }
  absl::Status RegisterSystemSharedMemory(const std::string& name, const std::string& key,
                                          uint64_t byte_size, uint64_t offset) override {
    absl::MutexLock l(&mu_);
    if (refuse_)
      return absl::FailedPreconditionError(
          "system shared memory is disabled: start kilnd with --shm-allow=PREFIX");
    if (regions_.count(name)) return absl::AlreadyExistsError(name);
    int fd = shm_open(key.c_str(), O_RDWR, 0);
    if (fd < 0) return absl::NotFoundError("no object " + key);
    void* p = mmap(nullptr, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED || offset != 0) return absl::InternalError("mmap");
    regions_[name] = {static_cast<char*>(p), byte_size};
    registered_.insert(name);
    return absl::OkStatus();
  }
  absl::Status UnregisterSystemSharedMemory(const std::string& name) override {
    absl::MutexLock l(&mu_);
    ++unregisters_;
    auto it = regions_.find(name);
    if (it == regions_.end()) return absl::NotFoundError(name);
    munmap(it->second.first, it->second.second);
    regions_.erase(it);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<PerfWorker>> NewWorker(
      const inference::ModelInferRequest& request) override {
    return std::unique_ptr<PerfWorker>(new Worker(this, request));
  }

  // What the inputs must hold (the raw bytes perf was given).
  std::string expected_x_;
  int probes_ = 0;
  absl::Mutex mu_;
  std::map<std::string, std::pair<char*, uint64_t>> regions_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> registered_ ABSL_GUARDED_BY(mu_);
  int unregisters_ ABSL_GUARDED_BY(mu_) = 0;

 private:
  // Reads X from its region, writes 2 X to DOUBLE's.
  class Worker : public PerfWorker {
   public:
    Worker(FakeShmServer* s, inference::ModelInferRequest r) : s_(s), r_(std::move(r)) {}
    absl::Status Infer() override {
      if (r_.raw_input_contents_size() != 0) return absl::InvalidArgumentError("raw data sent");
      absl::MutexLock l(&s_->mu_);
      const auto& in = r_.inputs(0).parameters();
      auto region = s_->regions_.find(in.at("shared_memory_region").string_param());
      if (region == s_->regions_.end()) return absl::NotFoundError("unknown region");
      char* base = region->second.first;
      const int64_t in_off = in.count("shared_memory_offset")
                                 ? in.at("shared_memory_offset").int64_param()
                                 : 0;
      const int64_t bytes = in.at("shared_memory_byte_size").int64_param();
      std::string x(base + in_off, static_cast<size_t>(bytes));
      if (x != s_->expected_x_) return absl::DataLossError("the input bytes differ");
      for (const auto& o : r_.outputs()) {
        if (o.name() != "DOUBLE") continue;
        float* out = reinterpret_cast<float*>(
            base + o.parameters().at("shared_memory_offset").int64_param());
        for (size_t i = 0; i < x.size() / 4; ++i) {
          float v;
          std::memcpy(&v, x.data() + 4 * i, 4);
          out[i] = 2 * v;
        }
      }
      return absl::OkStatus();
    }

   private:
    FakeShmServer* s_;
    inference::ModelInferRequest r_;
  };
  const bool fixed_, refuse_;
};

PerfOptions Options() {
  PerfOptions o;
  o.model = "m";
  o.batch = 3;
  o.concurrency = {1, 2};
  o.window = absl::Milliseconds(40);
  o.max_windows = 3;
  return o;
}

TEST(PerfShmTest, ParsesTheMode) {
  EXPECT_EQ(*ParseSharedMemoryMode("none"), SharedMemoryMode::kNone);
  EXPECT_EQ(*ParseSharedMemoryMode("system"), SharedMemoryMode::kSystem);
  auto bad = ParseSharedMemoryMode("cuda");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("use none or system"));
}

TEST(PerfShmTest, OutputSizesFromMetadataProbeOrOverride) {
  FakeShmServer fixed;
  auto request = MakePerfRequest(&fixed, Options());
  ASSERT_TRUE(request.ok()) << request.status();
  auto sizes = FindPerfOutputSizes(&fixed, Options(), *request, 0);
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_THAT(*sizes, ElementsAre(std::make_pair(std::string("DOUBLE"), uint64_t{3 * 4 * 4})));
  EXPECT_EQ(fixed.probes_, 0);  // every dim known: no inference

  FakeShmServer variable(/*fixed=*/false);
  sizes = FindPerfOutputSizes(&variable, Options(), *request, 0);
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_THAT(*sizes, ElementsAre(std::make_pair(std::string("DOUBLE"), uint64_t{48}),
                                  std::make_pair(std::string("ROWS"), uint64_t{3 * 3 * 8})));
  EXPECT_EQ(variable.probes_, 1);

  sizes = FindPerfOutputSizes(&variable, Options(), *request, 1000);
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_THAT(*sizes, ElementsAre(std::make_pair(std::string("DOUBLE"), uint64_t{1000}),
                                  std::make_pair(std::string("ROWS"), uint64_t{1000})));
  EXPECT_EQ(variable.probes_, 1);
}

TEST(PerfShmTest, LayoutIsAlignedAndTheRequestNamesTheRegion) {
  FakeShmServer fake;
  auto request = MakePerfRequest(&fake, Options());
  ASSERT_TRUE(request.ok());
  auto layout = MakePerfShmLayout(*request, {{"DOUBLE", 48}, {"ROWS", 72}});
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->inputs.size(), 1u);
  EXPECT_EQ(layout->inputs[0].offset, 0u);
  EXPECT_EQ(layout->inputs[0].byte_size, 48u);
  ASSERT_EQ(layout->outputs.size(), 2u);
  EXPECT_EQ(layout->outputs[0].offset, 64u);
  EXPECT_EQ(layout->outputs[1].offset, 128u);
  EXPECT_EQ(layout->total_bytes, 200u);

  auto r = MakePerfShmRequest(*request, *layout, "reg");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->raw_input_contents_size(), 0);
  EXPECT_EQ(r->inputs(0).parameters().at("shared_memory_region").string_param(), "reg");
  EXPECT_EQ(r->inputs(0).parameters().at("shared_memory_byte_size").int64_param(), 48);
  ASSERT_EQ(r->outputs_size(), 2);
  EXPECT_EQ(r->outputs(1).name(), "ROWS");
  EXPECT_EQ(r->outputs(1).parameters().at("shared_memory_offset").int64_param(), 128);
  EXPECT_EQ(r->outputs(1).parameters().at("shared_memory_byte_size").int64_param(), 72);

  EXPECT_FALSE(MakePerfShmLayout(*request, {{"EMPTY", 0}}).ok());
  EXPECT_FALSE(MakePerfShmLayout(*request, {{"HUGE", kMaxPerfShmBytes}}).ok());
  inference::ModelInferRequest no_raw = *request;
  no_raw.clear_raw_input_contents();
  EXPECT_EQ(MakePerfShmLayout(no_raw, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PerfShmTest, RunUsesOneRegionPerWorkerAndLeavesNothing) {
  FakeShmServer fake(/*fixed=*/false);
  auto request = MakePerfRequest(&fake, Options());
  ASSERT_TRUE(request.ok());
  fake.expected_x_ = request->raw_input_contents(0);
  auto levels = RunPerfWithSharedMemory(&fake, *request, Options(), 0, nullptr, nullptr);
  ASSERT_TRUE(levels.ok()) << levels.status();
  ASSERT_EQ(levels->size(), 2u);
  for (const PerfLevel& l : *levels) {
    EXPECT_GT(l.requests, 0);
    EXPECT_EQ(l.errors, 0) << l.first_error;
  }
  absl::MutexLock l(&fake.mu_);
  EXPECT_EQ(fake.registered_.size(), 3u);  // 1 worker, then 2 more
  EXPECT_TRUE(fake.regions_.empty());      // all unregistered
  EXPECT_EQ(fake.probes_, 1);
  EXPECT_TRUE(ShmObjects(OurPrefix()).empty());
}

TEST(PerfShmTest, WorkerRegionHoldsTheInputsAndGetsTheOutputs) {
  FakeShmServer fake;
  auto request = MakePerfRequest(&fake, Options());
  ASSERT_TRUE(request.ok());
  fake.expected_x_ = request->raw_input_contents(0);
  auto layout = MakePerfShmLayout(*request, {{"DOUBLE", 48}});
  ASSERT_TRUE(layout.ok());
  ShmPerfTransport shm(&fake, *layout, "/kiln_perf_");
  auto w = shm.NewWorker(*request);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Infer().ok());
  // The object as another process sees it: X, then 2 X at DOUBLE's slot.
  std::set<std::string> objects = ShmObjects(OurPrefix());
  ASSERT_EQ(objects.size(), 1u);
  int fd = shm_open(("/" + *objects.begin()).c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  void* p = mmap(nullptr, layout->total_bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(p, MAP_FAILED);
  const char* bytes = static_cast<const char*>(p);
  EXPECT_EQ(std::string(bytes, 48), fake.expected_x_);
  float x0, y0;
  std::memcpy(&x0, bytes, 4);
  std::memcpy(&y0, bytes + 64, 4);
  EXPECT_FLOAT_EQ(y0, 2 * x0);
  munmap(p, layout->total_bytes);
  EXPECT_EQ(shm.live_regions(), 1);
  w->reset();
  EXPECT_EQ(shm.live_regions(), 0);
  EXPECT_TRUE(ShmObjects(OurPrefix()).empty());
}

TEST(PerfShmTest, RefusedRegistrationNamesTheFlagAndLeavesNothing) {
  FakeShmServer fake(true, /*refuse=*/true);
  auto request = MakePerfRequest(&fake, Options());
  ASSERT_TRUE(request.ok());
  auto levels = RunPerfWithSharedMemory(&fake, *request, Options(), 0, nullptr, nullptr);
  EXPECT_EQ(levels.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(levels.status().message(), HasSubstr("--shared-memory system: registering region"));
  EXPECT_THAT(levels.status().message(), HasSubstr("--shm-allow"));
  EXPECT_TRUE(ShmObjects(OurPrefix()).empty());
}

TEST(PerfShmTest, CleanupNowUnlinksAndUnregistersEveryLiveRegion) {
  FakeShmServer fake;
  auto request = MakePerfRequest(&fake, Options());
  ASSERT_TRUE(request.ok());
  auto layout = MakePerfShmLayout(*request, {{"DOUBLE", 48}});
  ASSERT_TRUE(layout.ok());
  ShmPerfTransport shm(&fake, *layout);
  auto a = shm.NewWorker(*request);
  auto b = shm.NewWorker(*request);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ShmObjects(OurPrefix()).size(), 2u);
  EXPECT_EQ(shm.CleanupNow(), 2);
  EXPECT_TRUE(ShmObjects(OurPrefix()).empty());
  {
    absl::MutexLock l(&fake.mu_);
    EXPECT_TRUE(fake.regions_.empty());
    EXPECT_EQ(fake.unregisters_, 2);
  }
  a->reset();  // already cleaned: no second unregister
  b->reset();
  absl::MutexLock l(&fake.mu_);
  EXPECT_EQ(fake.unregisters_, 2);
}

}  // namespace
}  // namespace kiln
