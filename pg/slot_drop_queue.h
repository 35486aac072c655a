// Replication slots a standby no longer streams through, on upstreams it has left: they
// are dropped off the apply's path, on a thread of their own. A previous upstream whose
// host is down answers no connection, and a drop on the apply's path held every switch
// of upstream away from it for the connection timeout (5 s), the moment a failover
// needed the switch most. A drop that fails is retried every `retryEvery` until it
// succeeds, the slot is gone, or `maxAttempts` were made (the slot's WAL is bounded by
// max_slot_wal_keep_size, and that peer drops it when it next becomes primary).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "statemachine/result.h"

namespace dugong::pg {

class SlotDropQueue {
 public:
  // Drops `slot` on the server of `conninfo`; a missing slot is no error.
  using DropFn = std::function<Result<bool>(const std::string& conninfo, const std::string& slot)>;

  SlotDropQueue(DropFn drop, std::chrono::milliseconds retryEvery, int maxAttempts);
  // Waits for a drop in flight (bounded by its connection timeout); drops nothing more.
  ~SlotDropQueue();
  SlotDropQueue(const SlotDropQueue&) = delete;
  SlotDropQueue& operator=(const SlotDropQueue&) = delete;

  // The slot on `peerId` (reached by `conninfo`) is to go; replaces an earlier one there.
  void add(const std::string& peerId, const std::string& conninfo, const std::string& slot);
  // `peerId` is this standby's upstream again: its slot stays. A drop already in flight
  // may still land; the standby then creates its slot again (PgController::recreateMissingSlot).
  void cancel(const std::string& peerId);
  // How many drops are still to be made.
  size_t pending() const;

 private:
  struct Drop {
    std::string conninfo;
    std::string slot;
    int attempts = 0;
    std::chrono::steady_clock::time_point due;
  };
  void run();

  DropFn drop_;
  std::chrono::milliseconds retryEvery_;
  int maxAttempts_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<std::string, Drop> drops_;  // by peer id; under mu_
  bool stop_ = false;                  // under mu_
  std::thread thread_;
};

}  // namespace dugong::pg
