// A Timer (driver/env.h) on any scheduler that runs a function after a delay: the
// simulators' virtual time. A restart or cancel() makes the earlier start a no-op.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "driver/env.h"
#include "sim/world/event_queue.h"
#include "sim/world/task.h"

namespace dugong::agent {

class ScheduledTimer final : public Timer {
 public:
  // Takes a Task, not a std::function: the callback (the timer's serial and `fired`)
  // then stays inline in the queue's slot instead of costing a heap allocation per start.
  using Scheduler = std::function<void(int64_t delayMs, simworld::Task)>;
  explicit ScheduledTimer(Scheduler schedule) : schedule_(std::move(schedule)) {}
  // On the event queue itself: the callback is built in its slot, with no call through
  // a Scheduler (timers are started every few milliseconds of a simulation).
  explicit ScheduledTimer(simworld::EventQueue& queue) : queue_(&queue) {}

  void start(int64_t delayMs, std::function<void()> fired) override {
    uint64_t serial = ++*serial_;
    auto run = [live = std::weak_ptr<uint64_t>(serial_), serial, fired = std::move(fired)] {
      auto s = live.lock();
      if (s && *s == serial) fired();
    };
    if (queue_) {
      queue_->after(delayMs, std::move(run));
    } else {
      schedule_(delayMs, std::move(run));
    }
  }
  void cancel() override { ++*serial_; }

 private:
  Scheduler schedule_;
  simworld::EventQueue* queue_ = nullptr;
  std::shared_ptr<uint64_t> serial_ = std::make_shared<uint64_t>(0);
};

}  // namespace dugong::agent
