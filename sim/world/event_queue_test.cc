// The shared event queue: time order, scheduling order at equal times, recurring events
// ordered exactly like events that schedule themselves again, and the inline callable.
#include "sim/world/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dugong::simworld {
namespace {

TEST(EventQueue, RunsByTimeThenBySchedulingOrder) {
  EventQueue q;
  std::vector<std::string> log;
  q.at(20, [&] { log.push_back("b"); });
  q.at(10, [&] { log.push_back("a"); });
  q.at(20, [&] { log.push_back("c"); });
  while (!q.empty()) q.runNext();
  EXPECT_EQ(log, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(q.now(), 20);
}

// A world with a 10 ms tick that schedules a same-time event from inside the tick,
// plus events from outside that land on the tick's times before and after the tick
// scheduled itself. `recurring` chooses EventQueue::every or a self-scheduling event.
std::vector<std::string> tickWorld(bool recurring) {
  EventQueue q;
  std::vector<std::string> log;
  int ticks = 0;
  auto tickBody = [&] {
    log.push_back("tick@" + std::to_string(q.now()));
    q.after(10, [&] { log.push_back("from-tick@" + std::to_string(q.now())); });
    ++ticks;
  };
  std::function<void()> selfScheduling = [&] {
    tickBody();
    if (ticks < 5) q.after(10, selfScheduling);
  };
  q.at(20, [&] { log.push_back("early@20"); });  // scheduled before the tick's run at 10
  if (recurring) {
    q.every(10, [&] {
      tickBody();
      return ticks < 5 ? int64_t{10} : int64_t{1000000};
    });
  } else {
    q.after(10, selfScheduling);
  }
  q.at(10, [&] {
    log.push_back("outside@10");
    q.at(20, [&] { log.push_back("late@20"); });  // after the tick at 10 scheduled its next run
  });
  q.at(30, [&] { log.push_back("fixed@30"); });
  while (!q.empty() && q.nextAt() <= 60) q.runNext();
  return log;
}

TEST(EventQueue, ARecurringEventRunsInTheOrderOfOneThatSchedulesItselfAgain) {
  const std::vector<std::string> expected = tickWorld(false);
  EXPECT_EQ(tickWorld(true), expected);
  // The case the order matters for: at 20, the event scheduled before the tick at 10
  // ran comes first, the one scheduled after it comes after the tick.
  auto pos = [&](const std::string& s) { return std::find(expected.begin(), expected.end(), s) - expected.begin(); };
  EXPECT_LT(pos("early@20"), pos("tick@20"));
  EXPECT_LT(pos("tick@20"), pos("late@20"));
  EXPECT_LT(pos("from-tick@20"), pos("tick@20"));
}

TEST(Task, HoldsSmallAndLargeMoveOnlyCallables) {
  int small = 0;
  auto owned = std::make_unique<int>(7);
  Task a = [&small, p = std::move(owned)] { small += *p; };
  std::array<char, Task::kInlineBytes * 2> big{};
  big[0] = 3;
  Task b = [&small, big] { small += big[0]; };
  Task moved = std::move(a);
  EXPECT_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move): moved-from is empty
  moved();
  b();
  EXPECT_EQ(small, 10);
  b = std::move(moved);
  b();
  EXPECT_EQ(small, 17);
}

}  // namespace
}  // namespace dugong::simworld
