// A standby cluster's read-only look at its `dugong` source (docs/decisions/0083 3.3;
// phase 5 as built): a session of its own to the source's ensemble (zk::Client, on a
// thread of its own), which reads `<source root>/state` and the election children once a
// second and says what it saw when that changes. It writes nothing and holds no election
// node. Polled, not watched: the leader follows the source's failover within a poll of
// the state's write, and a poll needs no re-arming of watches across the source's
// sessions (0083 3.3 said "watching"; the difference is at most the interval).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "statemachine/event.h"
#include "statemachine/result.h"
#include "statemachine/standby.h"
#include "zk/options.h"

namespace dugong::zk {

// What one read of the source's ensemble gives (pure, for the tests): the state node and
// the present peers' ids, or the error of either read. `lastGood` describes the last
// reachable observation ("its primary a1, generation 9"), kept in `lastSeen` while the
// source is unreachable, with `since` (the first failed read's time, ISO 8601).
SourceObservation observeSource(const Result<StateNode>& state, const Result<PeerList>& present,
                                const std::string& lastGood, const std::string& since);
// "its primary a1 (present), sync a2, generation 9": how lastSeen names a reachable
// observation; "" for none.
std::string describeObservation(const SourceObservation& seen);

class SourceWatch {
 public:
  // Starts the thread at once. `onSeen` is called on that thread with the first
  // observation and each one that differs from the previous (reachable or not, the
  // state's bytes, whether its primary is present).
  SourceWatch(StandbySource source, std::optional<DigestAuth> auth, int intervalMs,
              std::function<void(SourceObservation)> onSeen);
  ~SourceWatch();  // stop(), then joins the thread (bounded by a read's timeout)
  SourceWatch(const SourceWatch&) = delete;
  SourceWatch& operator=(const SourceWatch&) = delete;

  // Asks the thread to stop and returns at once, without waiting for the read in
  // progress (a connection to an unreachable ensemble waits up to twice the interval):
  // the agent's event loop calls it. `onSeen` is never called once it has returned.
  void stop();
  // The thread has returned: the destructor joins it at once.
  bool ended() const;

  const StandbySource& source() const { return source_; }

 private:
  void run();
  void watch();

  StandbySource source_;
  std::optional<DigestAuth> auth_;
  int intervalMs_;
  std::function<void(SourceObservation)> onSeen_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool ended_ = false;
  std::thread thread_;
};

}  // namespace dugong::zk
