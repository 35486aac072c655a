// The daemon's clock across a suspend of the host, played by clocks the test moves: boot
// time runs on through the suspend, steady time does not. A timer whose due time a
// suspend ran past fires as soon as the suspend is seen, and a lease's round trip dated
// on the steady clock maps to boot time with the offset from before any suspend that may
// have followed it.
#include "agent/suspend_clock.h"

#include <atomic>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "agent/daemon_env.h"

namespace dugong::agent {
namespace {

constexpr int64_t kMs = 1000000;

// Clocks the test sets: steady time, and how far boot time runs ahead of it.
struct PlayedClocks {
  std::atomic<int64_t> steadyMs{1000000};
  std::atomic<int64_t> suspendedMs{0};
  std::function<SuspendTracker::Reading()> reader() {
    return [this] {
      return SuspendTracker::Reading{steadyMs * kMs, (steadyMs + 5000 + suspendedMs) * kMs};
    };
  }
  void suspend(int64_t ms) { suspendedMs += ms; }
};

TEST(SuspendClock, ASuspendIsSeenAndStampsMapConservatively) {
  PlayedClocks clocks;
  SuspendTracker t(clocks.reader());
  EXPECT_EQ(t.bootNowMs(), 1005000);
  EXPECT_EQ(t.sample(), 0);
  const int64_t sentAt = clocks.steadyMs;  // a round trip sent now
  clocks.steadyMs += 100;
  clocks.suspend(30000);  // and the host suspended before its confirmation came
  clocks.steadyMs += 100;
  // Before the suspend is seen, and after: the round trip keeps its time from before.
  EXPECT_EQ(t.bootOf(sentAt), sentAt + 5000);
  EXPECT_EQ(t.sample(), 30000);
  EXPECT_EQ(t.sample(), 0);
  EXPECT_EQ(t.bootOf(sentAt), sentAt + 5000);
  EXPECT_EQ(t.bootNowMs(), clocks.steadyMs + 35000);
  // A round trip sent after the suspend was seen: dated exactly.
  clocks.steadyMs += 1;
  EXPECT_EQ(t.bootOf(clocks.steadyMs), clocks.steadyMs + 35000);
}

// A driver timer due in a minute, on a host suspended for two: due at once on resume.
TEST(SuspendClock, ATimerASuspendRanPastFiresWhenTheSuspendIsSeen) {
  PlayedClocks clocks;
  boost::asio::io_context io;
  AsioClock clock(io, std::make_shared<SuspendTracker>(clocks.reader()));
  auto timer = clock.newTimer();
  auto other = clock.newTimer();
  bool fired = false;
  bool otherFired = false;
  timer->start(60000, [&fired] { fired = true; });
  other->start(600000, [&otherFired] { otherFired = true; });
  const int64_t before = clock.monotonicMs();
  clocks.suspend(120000);
  EXPECT_GE(clock.monotonicMs() - before, 120000);  // the driver's time counts the suspend
  clock.checkForSuspend();
  // Bounded far below the minute the steady timer would still wait.
  for (int i = 0; i < 100 && !fired; ++i) io.run_one_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(fired) << "the timer waited on as if the suspend had not happened";
  EXPECT_FALSE(otherFired) << "a timer still due after the suspend fired";
  // A cancelled timer stays cancelled through a suspend.
  bool cancelledFired = false;
  auto cancelled = clock.newTimer();
  cancelled->start(1000, [&cancelledFired] { cancelledFired = true; });
  cancelled->cancel();
  clocks.suspend(5000);
  clock.checkForSuspend();
  io.poll();
  EXPECT_FALSE(cancelledFired);
}

}  // namespace
}  // namespace dugong::agent
