#include "agent/suspend_clock.h"

#include <time.h>

#include <utility>

namespace dugong::agent {
namespace {

int64_t nsOf(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// steady_clock is CLOCK_MONOTONIC on Linux (libstdc++).
constexpr clockid_t kSteady = CLOCK_MONOTONIC;
// Growths of the offset below this are the two readings' own spread, not a suspend.
constexpr int64_t kSuspendNs = 2000000;

}  // namespace

int64_t bootTimeMs() { return nsOf(CLOCK_BOOTTIME) / 1000000; }
int64_t steadyTimeMs() { return nsOf(kSteady) / 1000000; }

SuspendTracker::Reading SuspendTracker::readClocks() {
  Reading r;
  r.steadyNs = nsOf(kSteady);  // first: the offset read is at most the true one plus the readings' spread
  r.bootNs = nsOf(CLOCK_BOOTTIME);
  return r;
}

SuspendTracker::SuspendTracker(std::function<Reading()> read) : read_(std::move(read)) {
  const Reading r = read_();
  firstOffsetNs_ = r.bootNs - r.steadyNs;
  steps_.push_back(Step{r.steadyNs / 1000000, firstOffsetNs_});
}

int64_t SuspendTracker::sample() {
  const Reading r = read_();
  const int64_t offset = r.bootNs - r.steadyNs;
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t grown = offset - steps_.back().offsetNs;
  if (grown < kSuspendNs) return 0;
  steps_.push_back(Step{r.steadyNs / 1000000, offset});
  if (steps_.size() > kStepsKept) steps_.pop_front();
  return grown / 1000000;
}

int64_t SuspendTracker::bootOf(int64_t steadyMs) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t offset = firstOffsetNs_;
  for (const auto& s : steps_) {
    if (s.seenAtSteadyMs >= steadyMs) break;  // seen in the same ms: maybe after it
    offset = s.offsetNs;
  }
  return steadyMs + offset / 1000000;
}

}  // namespace dugong::agent
