// The one event queue of a simulated world, on virtual time: events run in time order,
// and events due at the same time in the order they were scheduled. Nothing else
// orders what happens in a simulation, so a run replays exactly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "sim/world/task.h"

namespace dugong::simworld {

class EventQueue {
 public:
  // A recurring event: runs, then returns the delay until its next run.
  using Recurring = std::function<int64_t()>;

  explicit EventQueue(int64_t start = 0) : now_(start) {}

  int64_t now() const { return now_; }
  // `fn`: any callable `void()`, or a Task. The callable is built in its slot.
  template <class F>
  void at(int64_t t, F&& fn) {
    uint32_t slot;
    if (free_.empty()) {
      slot = slotCount_++;
      if ((slot & (kChunkSlots - 1)) == 0) chunks_.push_back(std::make_unique<Task[]>(kChunkSlots));
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    task(slot).emplace(std::forward<F>(fn));
    push(Key{t, seq_++, slot});
  }
  template <class F>
  void after(int64_t delay, F&& fn) {
    at(now_ + delay, std::forward<F>(fn));
  }

  // Runs `fn` after `delay`, then again after each delay it returns, forever. It runs in
  // exactly the order of an event that schedules itself again with after() as the last
  // thing it does; it only spares the queue the work (most events of a simulation are
  // its periodic ticks).
  void every(int64_t delay, Recurring fn) {
    recurring_.push_back(std::make_unique<RecurringEvent>(RecurringEvent{Key{now_ + delay, seq_++, 0}, std::move(fn)}));
  }

  bool empty() const { return heap_.empty() && recurring_.empty(); }
  // REQUIRES: !empty().
  int64_t nextAt() const {
    const RecurringEvent* r = nextRecurring();
    if (heap_.empty()) return r->key.t;
    return r && Later{}(heap_.front(), r->key) ? r->key.t : heap_.front().t;
  }
  // Runs the earliest event, with the clock at its time. REQUIRES: !empty().
  void runNext() { run(nullptr); }
  // The same for a world that keeps a copy of the clock: `clock` is set to the event's
  // time before it runs (which spares it a nextAt() per event).
  void runNext(int64_t& clock) { run(&clock); }
  // Moves the clock forward to `t` (never back) with nothing run.
  void advanceTo(int64_t t) { now_ = std::max(now_, t); }

 private:
  // The heap holds small keys; the callbacks stay put in their slots, in chunks that
  // never move (an event runs in its slot while it schedules more).
  static constexpr uint32_t kChunkSlots = 64;
  struct Key {
    int64_t t;
    uint64_t seq;
    uint32_t slot;
  };
  // A function object, not a function pointer: the heap operations inline it.
  struct Later {
    bool operator()(const Key& a, const Key& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  // Held by pointer: one may add another while it runs.
  struct RecurringEvent {
    Key key;
    Recurring fn;
  };
  void run(int64_t* clock) {
    if (RecurringEvent* r = nextRecurring(); r && (heap_.empty() || Later{}(heap_.front(), r->key))) {
      now_ = r->key.t;
      if (clock) *clock = now_;
      const int64_t delay = r->fn();
      r->key = Key{now_ + delay, seq_++, 0};
      return;
    }
    const Key key = pop();
    now_ = key.t;
    if (clock) *clock = now_;
    // Run where it is (slots stay put as more are added), then free the slot.
    Task& fn = task(key.slot);
    fn();
    fn.reset();
    free_.push_back(key.slot);
  }
  // A 4-ary min-heap on (t, seq): half as deep as a binary one, and the four children
  // of a node are adjacent. (t, seq) orders all events, so the order they come out in
  // is the same whatever the heap's shape.
  static constexpr size_t kArity = 4;
  void push(Key key) {
    size_t i = heap_.size();
    heap_.push_back(key);
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!Later{}(heap_[parent], key)) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = key;
  }
  Key pop() {
    const Key top = heap_.front();
    const Key last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return top;
    size_t i = 0;
    for (;;) {
      const size_t first = i * kArity + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = std::min(first + kArity, n);
      for (size_t c = first + 1; c < end; ++c) {
        if (Later{}(heap_[best], heap_[c])) best = c;
      }
      if (!Later{}(last, heap_[best])) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
    return top;
  }
  Task& task(uint32_t slot) { return chunks_[slot / kChunkSlots][slot % kChunkSlots]; }
  RecurringEvent* nextRecurring() const {
    RecurringEvent* best = nullptr;
    for (const auto& r : recurring_) {
      if (!best || Later{}(best->key, r->key)) best = r.get();
    }
    return best;
  }

  int64_t now_;
  uint64_t seq_ = 0;
  std::vector<Key> heap_;
  std::vector<std::unique_ptr<Task[]>> chunks_;
  uint32_t slotCount_ = 0;
  std::vector<uint32_t> free_;
  std::vector<std::unique_ptr<RecurringEvent>> recurring_;
};

}  // namespace dugong::simworld
