// The driver's health protocol (driver/health.cc, which alone changes it; the other
// protocols ask its queries): postgres' health as last reported, since when it has been
// unhealthy while it should run, the last restart, and the withdrawal from the
// coordinator of a peer whose postgres restarts did not heal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dugong::driver {

class Core;

class Health {
 public:
  bool healthy() const { return healthy_; }
  const std::string& detail() const { return detail_; }  // the last unhealthy report's
  bool withdrawn() const { return withdrawn_; }

 private:
  friend class Core;  // health.cc
  bool healthy_ = true;
  std::optional<int64_t> unhealthySince_;
  int64_t lastRestartStarted_ = INT64_MIN / 2;
  std::string detail_;
  bool withdrawn_ = false;
  std::string withdrawalWhy_;             // why a withdrawn peer joins again
  std::optional<int64_t> joinedAgainAt_;  // by joinAgainAfterWithdrawal
};

}  // namespace dugong::driver
