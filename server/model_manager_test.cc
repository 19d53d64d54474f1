// ModelManager: loads and unloads of different models run in parallel (a
// per-model lock), those of one model are serialized, and StopAll waits for
// the loads in progress, which then serve nothing. A gated loader holds
// the load of model "slow" until the test opens the gate (issue 13.6: a
// stuck load blocked every other Load / Unload behind one global lock).
#include "server/model_manager.h"

#include <sys/stat.h>

#include <atomic>
#include <functional>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/clock.h"
#include "server/testing/fake_backend.h"

namespace kiln {
namespace {

// Loads of model "slow" wait until Open(); every load is a FakeBackend.
class GatedLoader : public BackendLoader {
 public:
  absl::StatusOr<std::unique_ptr<ModelBackend>> Load(const std::string& path,
                                                     const std::string& device) override {
    if (path.find("/slow/") != std::string::npos) {
      ++waiting_;
      open_.WaitForNotification();
    }
    return fake_.Load(path, device);
  }
  void Open() {
    if (!open_.HasBeenNotified()) open_.Notify();
  }
  // Waits until `n` loads of "slow" have reached the gate.
  bool AwaitWaiting(int n) {
    for (int i = 0; i < 2000 && waiting_.load() < n; ++i) absl::SleepFor(absl::Milliseconds(5));
    return waiting_.load() >= n;
  }
  int waiting() const { return waiting_.load(); }

 private:
  testing::FakeLoader fake_;
  absl::Notification open_;
  std::atomic<int> waiting_{0};
};

std::string MakeRepo(const std::string& name) {
  std::string root = absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp", "/",
                                  name);
  ::mkdir(root.c_str(), 0755);
  for (const char* m : {"slow", "fast", "other"}) {
    ::mkdir((root + "/" + m).c_str(), 0755);
    ::mkdir((root + "/" + m + "/1").c_str(), 0755);
    std::ofstream(root + "/" + m + "/1/model.onnx") << "fake";
  }
  return root;
}

// Runs `fn` on a thread; Done(timeout) tells whether it returned in time.
class Background {
 public:
  explicit Background(std::function<absl::Status()> fn)
      : thread_([this, fn] {
          status_ = fn();
          done_.Notify();
        }) {}
  ~Background() { thread_.join(); }
  bool Done(absl::Duration timeout) { return done_.WaitForNotificationWithTimeout(timeout); }
  absl::Status status() {
    done_.WaitForNotification();
    return status_;
  }

 private:
  absl::Notification done_;
  absl::Status status_;
  std::thread thread_;
};

class ModelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { Restart(absl::InfiniteDuration()); }
  // A new manager with this load timeout.
  void Restart(absl::Duration load_timeout) {
    ModelManager::Options o;
    o.repository = MakeRepo(::testing::UnitTest::GetInstance()->current_test_info()->name());
    o.mode = ControlMode::kExplicit;
    o.startup_models = {"fast"};
    o.load_timeout = load_timeout;
    manager_.reset();
    manager_ = std::make_unique<ModelManager>(o, &loader_, nullptr, &clock_);
    ASSERT_TRUE(manager_->Start().ok());
  }
  void TearDown() override {
    loader_.Open();  // whatever happened, nothing stays blocked
  }

  std::string State(const std::string& name) {
    for (const auto& e : manager_->Index(false))
      if (e.name == name) return e.state;
    return "";
  }
  std::string Reason(const std::string& name) {
    for (const auto& e : manager_->Index(false))
      if (e.name == name) return e.reason;
    return "";
  }

  GatedLoader loader_;
  RealClock clock_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ModelManagerTest, SlowLoadDoesNotBlockOtherModels) {
  Background slow([this] { return manager_->Load("slow"); });
  ASSERT_TRUE(loader_.AwaitWaiting(1));
  EXPECT_EQ(State("slow"), "LOADING");
  {
    Background other([this] { return manager_->Load("other"); });
    EXPECT_TRUE(other.Done(absl::Seconds(10))) << "Load(other) waited for the load of slow";
    loader_.Open();  // let a blocked call finish before the checks below
    EXPECT_TRUE(other.status().ok()) << other.status();
  }
  loader_.Open();
  EXPECT_TRUE(slow.status().ok()) << slow.status();
  EXPECT_EQ(State("slow"), "READY");
}

TEST_F(ModelManagerTest, SlowLoadDoesNotBlockUnloadOrReloadOfOthers) {
  Background slow([this] { return manager_->Load("slow"); });
  ASSERT_TRUE(loader_.AwaitWaiting(1));
  {
    Background unload([this] { return manager_->Unload("fast"); });
    EXPECT_TRUE(unload.Done(absl::Seconds(10))) << "Unload(fast) waited for the load of slow";
    loader_.Open();
    EXPECT_TRUE(unload.status().ok()) << unload.status();
  }
  EXPECT_FALSE(manager_->Get("fast", "").ok());
  loader_.Open();
  EXPECT_TRUE(slow.status().ok());
  EXPECT_TRUE(manager_->Load("fast").ok());
  EXPECT_TRUE(manager_->Get("fast", "").ok());
}

TEST_F(ModelManagerTest, LoadsOfOneModelAreSerialized) {
  Background first([this] { return manager_->Load("slow"); });
  ASSERT_TRUE(loader_.AwaitWaiting(1));
  Background second([this] { return manager_->Load("slow"); });
  Background unload([this] { return manager_->Unload("slow"); });
  // Both wait for the first load: none of them reaches the loader.
  EXPECT_FALSE(second.Done(absl::Milliseconds(300)));
  EXPECT_FALSE(unload.Done(absl::Milliseconds(1)));
  EXPECT_EQ(loader_.waiting(), 1);
  loader_.Open();
  EXPECT_TRUE(first.status().ok());
  EXPECT_TRUE(second.status().ok());
  EXPECT_TRUE(unload.status().ok());
}

TEST_F(ModelManagerTest, StopAllWaitsForALoadWhichThenServesNothing) {
  Background slow([this] { return manager_->Load("slow"); });
  ASSERT_TRUE(loader_.AwaitWaiting(1));
  Background stop([this] {
    manager_->StopAll();
    return absl::OkStatus();
  });
  EXPECT_FALSE(stop.Done(absl::Milliseconds(200)));
  loader_.Open();
  EXPECT_TRUE(stop.Done(absl::Seconds(10)));
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kUnavailable) << slow.status();
  EXPECT_TRUE(manager_->Ready().empty());
  EXPECT_EQ(manager_->Load("fast").code(), absl::StatusCode::kUnavailable);
}

// Issue 13.6: a load past --load-timeout fails with DEADLINE_EXCEEDED and
// leaves the model UNAVAILABLE; the stuck load blocks neither the caller
// nor other models, loads of that model are refused (not queued) while it
// still runs, and when it ends its result is discarded.
TEST_F(ModelManagerTest, LoadPastTheTimeoutFailsAndIsDiscarded) {
  Restart(absl::Milliseconds(300));
  const absl::Time start = absl::Now();
  absl::Status s = manager_->Load("slow");
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(loader_.AwaitWaiting(1));
  EXPECT_EQ(State("slow"), "UNAVAILABLE");
  EXPECT_NE(Reason("slow").find("load timeout"), std::string::npos) << Reason("slow");
  absl::Status again = manager_->Load("slow");
  EXPECT_EQ(again.code(), absl::StatusCode::kUnavailable) << again;
  EXPECT_NE(again.message().find("still running"), std::string::npos) << again;
  EXPECT_EQ(loader_.waiting(), 1);  // refused, not queued behind the stuck load
  EXPECT_TRUE(manager_->Load("other").ok());  // other models load meanwhile
  EXPECT_TRUE(manager_->Get("other", "").ok());

  loader_.Open();  // the stuck load ends: its model must not be served
  for (int i = 0; i < 1000 && Reason("slow").find("was discarded") == std::string::npos; ++i)
    absl::SleepFor(absl::Milliseconds(5));
  EXPECT_NE(Reason("slow").find("was discarded"), std::string::npos) << Reason("slow");
  EXPECT_FALSE(manager_->Get("slow", "").ok());
  EXPECT_EQ(State("slow"), "UNAVAILABLE");
  // Now a new load runs, within the timeout, and serves.
  EXPECT_TRUE(manager_->Load("slow").ok());
  EXPECT_EQ(State("slow"), "READY");
}

// A load that ends after the timeout is discarded even when its caller has
// not yet woken up to the timeout (descheduled past it): the load checks
// the deadline itself before it commits. With a timeout of 1 ns every load
// is longer; the caller's own wait used to race the load's commit.
TEST_F(ModelManagerTest, ALoadLongerThanTheTimeoutNeverServes) {
  ModelManager::Options o;
  o.repository = MakeRepo("ALoadLongerThanTheTimeoutNeverServes");
  o.mode = ControlMode::kExplicit;
  o.load_timeout = absl::Nanoseconds(1);
  manager_.reset();
  manager_ = std::make_unique<ModelManager>(o, &loader_, nullptr, &clock_);
  ASSERT_TRUE(manager_->Start().ok());
  for (int i = 0; i < 5; ++i) {
    absl::Status s = manager_->Load("other");
    if (s.code() == absl::StatusCode::kUnavailable) {  // the last discarded load still ends
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  }
  for (int i = 0; i < 1000 && Reason("other").find("was discarded") == std::string::npos; ++i)
    absl::SleepFor(absl::Milliseconds(5));
  EXPECT_NE(Reason("other").find("was discarded"), std::string::npos) << Reason("other");
  EXPECT_FALSE(manager_->Get("other", "").ok());
  EXPECT_EQ(State("other"), "UNAVAILABLE");
}

// A load that ends within the timeout answers as before, and StopAll waits
// for a timed load still running.
TEST_F(ModelManagerTest, TimedLoadWithinTheTimeoutServes) {
  Restart(absl::Seconds(30));
  Background slow([this] { return manager_->Load("slow"); });
  ASSERT_TRUE(loader_.AwaitWaiting(1));
  EXPECT_EQ(State("slow"), "LOADING");
  loader_.Open();
  EXPECT_TRUE(slow.status().ok()) << slow.status();
  EXPECT_EQ(State("slow"), "READY");
  EXPECT_TRUE(manager_->Get("slow", "").ok());
}

// Each instance gets its share of the CPU threads (model_spec.h's
// InstanceThreads), or the config's intra_op_thread_count.
TEST(ModelManagerThreadsTest, InstancesGetTheirThreads) {
  const std::string root = MakeRepo("InstancesGetTheirThreads");
  std::ofstream(root + "/fast/config.pbtxt")
      << "max_batch_size: 8\ninstance_group [ { count: 2 kind: KIND_CPU } ]\n";
  std::ofstream(root + "/other/config.pbtxt")
      << "max_batch_size: 8\ninstance_group [ { count: 3 } ]\n"
      << R"(parameters { key: "intra_op_thread_count" value { string_value: "5" } })";
  auto log = std::make_shared<testing::FakeLog>();
  testing::FakeLoader loader(log);
  RealClock clock;
  ModelManager::Options o;
  o.repository = root;
  o.mode = ControlMode::kExplicit;
  o.cpu_threads = 4;
  ModelManager manager(o, &loader, nullptr, &clock);
  ASSERT_TRUE(manager.Start().ok());
  ASSERT_TRUE(manager.Load("fast").ok());
  ASSERT_TRUE(manager.Load("other").ok());
  absl::MutexLock lock(&log->mu);
  EXPECT_EQ(log->runner_threads, (std::vector<int>{2, 2, 5, 5, 5}));
}

}  // namespace
}  // namespace kiln
