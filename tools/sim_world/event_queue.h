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
    heap_.push_back(Item{t, seq_++, std::move(fn)});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }
  void after(int64_t delay, std::function<void()> fn) { at(now_ + delay, std::move(fn)); }

  bool empty() const { return heap_.empty(); }
  // REQUIRES: !empty().
  int64_t nextAt() const { return heap_.front().t; }
  // Runs the earliest event, with the clock at its time. REQUIRES: !empty().
  void runNext() {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    Item item = std::move(heap_.back());
    heap_.pop_back();
    now_ = item.t;
    item.fn();
  }
  // Moves the clock forward to `t` (never back) with nothing run.
  void advanceTo(int64_t t) { now_ = std::max(now_, t); }

 private:
  struct Item {
    int64_t t;
    uint64_t seq;
    std::function<void()> fn;
  };
  static bool later(const Item& a, const Item& b) { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }

  int64_t now_;
  uint64_t seq_ = 0;
  std::vector<Item> heap_;
};

}  // namespace dugong::simworld
