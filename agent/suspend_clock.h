// The daemon's clock for deadlines (docs/security.md "Clocks that stop", decision 0071):
// CLOCK_BOOTTIME, which runs on while the host is suspended, where CLOCK_MONOTONIC
// (std::chrono::steady_clock) stops. ZooKeeper expires a session, and a sync's promise
// ends, in real time: a primary suspended through its lease's end must find the lease
// ended when it resumes, not still ahead by a clock that stood still.
//
// Boot time runs ahead of steady time by the host's suspends: the tracker samples both
// and sees each suspend as a growth of that offset. Times taken on the steady clock by
// other components (the ZooKeeper client dates its lease round trips so) map to boot
// time by the offset known before them: a round trip sent before a suspend was seen
// is dated with the offset from before it, so a suspend that may have come after the
// send shortens the lease, never lengthens it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace dugong::agent {

// CLOCK_BOOTTIME, in ms.
int64_t bootTimeMs();
// std::chrono::steady_clock (CLOCK_MONOTONIC on Linux), in ms.
int64_t steadyTimeMs();

class SuspendTracker {
 public:
  // Both clocks read together, in ns: steady first.
  struct Reading {
    int64_t steadyNs = 0;
    int64_t bootNs = 0;
  };
  static Reading readClocks();
  // `read`: the clocks (tests pass their own, to play a suspend).
  explicit SuspendTracker(std::function<Reading()> read = readClocks);
  // Boot time now, in ms (of `read`).
  int64_t bootNowMs() const { return read_().bootNs / 1000000; }
  // Samples both clocks: the length of the suspend seen since the last sample (0: none).
  // Thread-safe.
  int64_t sample();
  // The boot time of `steadyMs` (a steady time of the past): its offset is the one seen
  // at the last sample before it (the smallest at the first sample).
  int64_t bootOf(int64_t steadyMs) const;

 private:
  struct Step {
    int64_t seenAtSteadyMs;
    int64_t offsetNs;  // boot - steady from then on
  };
  static constexpr size_t kStepsKept = 16;
  std::function<Reading()> read_;
  mutable std::mutex mu_;
  int64_t firstOffsetNs_ = 0;
  std::deque<Step> steps_;  // the offset's growths, oldest first; the first is at construction
};

}  // namespace dugong::agent
