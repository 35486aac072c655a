// The driver's clean handover of a planned switchover (driver/handover.cc, which alone
// changes it; the other protocols ask its queries).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "statemachine/pg_config.h"

namespace dugong::driver {

class Core;

class Handover {
 public:
  // The primary has stopped postgres for a switchover and waits to be deposed.
  bool handingOver() const { return from_.has_value(); }
  // The generation whose primary's WAL stream ended while this sync waited to take over
  // for a switchover: no promise holds that takeover (core_failsafe.cc).
  std::optional<int64_t> streamEndedIn() const { return streamEndedIn_; }

 private:
  friend class Core;  // handover.cc
  // As primary: its configuration before it stopped postgres for a switchover, whether
  // the sync's wait is over (start postgres again once idle), and the promote request
  // (JSON) last handed over for.
  std::optional<PgConfig> from_;
  bool timedOut_ = false;
  std::string request_;
  // The promote request (JSON) whose stop released the sync from its promises.
  std::string releasedFor_;
  // As sync: the generation whose takeover already waited for the old primary's stop.
  std::optional<int64_t> waitedIn_;
  std::optional<int64_t> streamEndedIn_;
};

}  // namespace dugong::driver
