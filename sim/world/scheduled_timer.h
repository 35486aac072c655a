// A Timer (driver/env.h) on the simulators' event queue: virtual time. A restart or
// cancel() makes the earlier start a no-op.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "driver/env.h"
#include "sim/world/event_queue.h"

namespace dugong::simworld {

class ScheduledTimer final : public driver::Timer {
 public:
  // The callback (the timer's serial and `fired`) is built in the queue's slot, with no
  // call through a std::function: timers are started every few milliseconds of a simulation.
  explicit ScheduledTimer(EventQueue& queue) : queue_(queue) {}

  void start(int64_t delayMs, std::function<void()> fired) override {
    uint64_t serial = ++*serial_;
    queue_.after(delayMs, [live = std::weak_ptr<uint64_t>(serial_), serial, fired = std::move(fired)] {
      auto s = live.lock();
      if (s && *s == serial) fired();
    });
  }
  void cancel() override { ++*serial_; }

 private:
  EventQueue& queue_;
  std::shared_ptr<uint64_t> serial_ = std::make_shared<uint64_t>(0);
};

}  // namespace dugong::simworld
