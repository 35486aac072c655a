#include "pg/slot_drop_queue.h"

#include <spdlog/spdlog.h>

namespace dugong::pg {

SlotDropQueue::SlotDropQueue(DropFn drop, std::chrono::milliseconds retryEvery, int maxAttempts)
    : drop_(std::move(drop)), retryEvery_(retryEvery), maxAttempts_(maxAttempts), thread_([this] { run(); }) {}

SlotDropQueue::~SlotDropQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SlotDropQueue::add(const std::string& peerId, const std::string& conninfo, const std::string& slot) {
  {
    std::lock_guard lock(mu_);
    drops_[peerId] = Drop{conninfo, slot, 0, std::chrono::steady_clock::now()};
  }
  wake_.notify_all();
}

void SlotDropQueue::cancel(const std::string& peerId) {
  std::lock_guard lock(mu_);
  drops_.erase(peerId);
}

size_t SlotDropQueue::pending() const {
  std::lock_guard lock(mu_);
  return drops_.size();
}

void SlotDropQueue::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    auto next = drops_.end();
    for (auto it = drops_.begin(); it != drops_.end(); ++it) {
      if (next == drops_.end() || it->second.due < next->second.due) next = it;
    }
    if (next == drops_.end()) {
      wake_.wait(lock);
      continue;
    }
    if (next->second.due > std::chrono::steady_clock::now()) {
      // A copy: cancel() may erase the entry while this waits.
      const auto due = next->second.due;
      wake_.wait_until(lock, due);
      continue;
    }
    const std::string peer = next->first;
    const Drop d = next->second;
    lock.unlock();
    auto r = drop_(d.conninfo, d.slot);
    lock.lock();
    auto now = drops_.find(peer);
    // Cancelled, or replaced by a newer drop on that peer meanwhile: that one stands.
    if (now == drops_.end() || now->second.slot != d.slot || now->second.attempts != d.attempts) continue;
    const int attempts = d.attempts + 1;
    if (r) {
      spdlog::info("pg: dropped replication slot {} on the previous upstream {}", d.slot, peer);
      drops_.erase(now);
    } else if (attempts >= maxAttempts_) {
      spdlog::warn("pg: gave up dropping replication slot {} on the previous upstream {} after {} attempts ({}); its "
                   "WAL is bounded by max_slot_wal_keep_size and the slot is dropped when that peer next becomes "
                   "primary",
                   d.slot, peer, attempts, r.error());
      drops_.erase(now);
    } else {
      if (attempts == 1) {
        spdlog::warn("pg: could not drop replication slot {} on the previous upstream {} ({}); retrying every {} ms",
                     d.slot, peer, r.error(), retryEvery_.count());
      }
      now->second.attempts = attempts;
      now->second.due = std::chrono::steady_clock::now() + retryEvery_;
    }
  }
}

}  // namespace dugong::pg
