// The driver's deposed peer (driver/rejoin.cc, which alone changes these; the other
// protocols ask their queries): the automatic rejoin (docs/rejoin.md), and the data state
// published for a setup of a cluster with no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dugong::driver {

class Core;

class Rejoin {
 public:
  // Postgres follows the primary since a successful rejoin, and the peer is not yet out of
  // `deposed`.
  bool rejoined() const { return rejoinedTo_.has_value(); }
  // Why the last automatic rejoin failed; empty once one worked.
  const std::string& lastError() const { return lastError_; }

 private:
  friend class Core;  // rejoin.cc
  // A failed rejoin is tried again after a delay (0: not failed in this generation),
  // doubled after each failure, up to the maximum.
  static constexpr int64_t kFirstRetryMs = 5000;
  static constexpr int64_t kMaxRetryMs = 300000;
  std::optional<int64_t> triedGeneration_;  // the generation last tried
  int64_t retryDelayMs_ = 0;
  // Due once its timer fired (or, after a failed removal from `deposed`, looked at again).
  bool retryDue_ = false;
  bool timerMarksDue_ = false;
  std::optional<std::string> rejoinedTo_;  // the primary postgres follows since a rejoin
  std::string reason_;                     // of the removal from `deposed`, for the history
  std::string lastError_;
};

// The data state published for a setup: published, or being read.
class DataStatePublication {
 private:
  friend class Core;  // rejoin.cc
  bool published_ = false;
  bool reading_ = false;
};

}  // namespace dugong::driver
