// A process named by its pid and its start time (/proc/<pid>/stat), so that a pid that
// the system has since given to another process is never signalled.
//
// Used for the watchdog a stopped agent leaves armed behind it (agent/watchdog.h): the
// file `<zookeeper.sessionFile>.watchdog` names the watchdog of the agent's last run, and
// the next run (or `dugong --leave`) ends that watchdog once it has taken over.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

struct ProcessStamp {
  int pid = 0;
  uint64_t startTime = 0;  // clock ticks after boot (field 22 of /proc/<pid>/stat)
  std::string name;        // the command name (field 2, without the parentheses)

  bool operator==(const ProcessStamp& o) const { return pid == o.pid && startTime == o.startTime; }
  // "<pid> <startTime>", as the record file holds it.
  std::string text() const;
};

// The running process `pid`; nullopt when there is none, or only a zombie.
std::optional<ProcessStamp> processStamp(int pid);
// "<pid> <startTime>"; nullopt if the text is not that.
std::optional<ProcessStamp> parseProcessStamp(const std::string& text);

// Sends `signal` to `p` if it still runs (the same pid and start time), then waits up to
// `wait` for it to be gone. True when it is gone (or was already).
bool endProcess(const ProcessStamp& p, int signal, std::chrono::milliseconds wait);

// The record of one process in a small file, written atomically (mode 0644).
Result<bool> writeProcessRecord(const std::string& path, const ProcessStamp& p);
// nullopt when there is no file; an error for one that cannot be read or parsed.
Result<std::optional<ProcessStamp>> readProcessRecord(const std::string& path);

}  // namespace dugong::agent
