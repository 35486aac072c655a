// The one event queue of a simulated world, on virtual time: events run in time order,
// and events due at the same time in the order they were scheduled. Nothing else
// orders what happens in a simulation, so a run replays exactly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace dugong::simworld {

class EventQueue {
 public:
  explicit EventQueue(int64_t start = 0) : now_(start) {}

  int64_t now() const { return now_; }
  void at(int64_t t, std::function<void()> fn) {
    uint32_t slot;
    if (free_.empty()) {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back(std::move(fn));
    } else {
      slot = free_.back();
      free_.pop_back();
      slots_[slot] = std::move(fn);
    }
    heap_.push_back(Key{t, seq_++, slot});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }
  void after(int64_t delay, std::function<void()> fn) { at(now_ + delay, std::move(fn)); }

  bool empty() const { return heap_.empty(); }
  // REQUIRES: !empty().
  int64_t nextAt() const { return heap_.front().t; }
  // Runs the earliest event, with the clock at its time. REQUIRES: !empty().
  void runNext() {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Key key = heap_.back();
    heap_.pop_back();
    now_ = key.t;
    std::function<void()> fn = std::move(slots_[key.slot]);
    slots_[key.slot] = nullptr;
    free_.push_back(key.slot);
    fn();
  }
  // Moves the clock forward to `t` (never back) with nothing run.
  void advanceTo(int64_t t) { now_ = std::max(now_, t); }

 private:
  // The heap holds small keys; the callbacks stay put in their slots.
  struct Key {
    int64_t t;
    uint64_t seq;
    uint32_t slot;
  };
  static bool later(const Key& a, const Key& b) { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }

  int64_t now_;
  uint64_t seq_ = 0;
  std::vector<Key> heap_;
  std::vector<std::function<void()>> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace dugong::simworld
