// The sync's promise across a restart of its agent (docs/isolated-primary.md, "The
// sync's promise across a restart"): a promise not to take over (driver/failsafe.h) is
// recorded in a file beside the session file before it is answered, and the next run of
// the agent holds its takeovers until the recorded end, whatever its own configuration.
//
// The end is kept on CLOCK_BOOTTIME with the kernel's boot id: the clock runs on across
// process restarts and a suspend of the host, and a record of another boot (the host
// restarted since) is held for as long as it ran on when it was written, since at least
// no time has passed since.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

struct BootClock {
  std::string bootId;  // /proc/sys/kernel/random/boot_id
  int64_t ms = 0;      // CLOCK_BOOTTIME
  static BootClock now();
};

class PromiseRecord {
 public:
  explicit PromiseRecord(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // Records that no takeover by this peer may happen for `remainingMs` from `now` (0:
  // none is promised): a temporary file (0600), synced, renamed over the file.
  Result<bool> save(int64_t remainingMs, const BootClock& now) const;
  // How long the recorded promise still runs at `now` (at most kFailsafeMaxDurationMs):
  // nullopt when there is no file; an error for a file that cannot be read or parsed.
  Result<std::optional<int64_t>> remainingAt(const BootClock& now) const;

 private:
  std::string path_;
};

}  // namespace dugong::agent
