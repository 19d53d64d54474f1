// Clock: the time source of the batcher, injected so tests control time.
//
// Besides Now(), a clock knows how to wait on an absl::Mutex condition with
// a deadline in its own time. RealClock waits in real time. FakeClock's time
// only moves through Advance(); waiters re-check their condition and the
// fake deadline whenever time advances (and at least every millisecond of
// real time, so a condition change made elsewhere is noticed).
//
// Thread safety: both clocks are thread-safe.
#ifndef KILN_SERVER_CLOCK_H_
#define KILN_SERVER_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kiln {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
  // With `mu` held: waits until `cond` holds or Now() >= deadline. Returns
  // whether `cond` holds.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                 absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

class RealClock : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return mu->AwaitWithDeadline(cond, deadline);
  }
};

class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(1)) : now_(start) {}
  absl::Time Now() override {
    absl::MutexLock l(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock l(&mu_);
    now_ += d;
  }
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    while (true) {
      if (cond.Eval()) return true;
      if (Now() >= deadline) return false;
      mu->AwaitWithTimeout(cond, absl::Milliseconds(1));
    }
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kiln

#endif  // KILN_SERVER_CLOCK_H_
