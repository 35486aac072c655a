// Progress of a rebuild on a terminal, in the style of pg_basebackup --progress: the
// bytes the rebuild's processes (pg_basebackup, pg_rewind, and what they run) have
// written so far, and the rate, on one line rewritten every second. Measured from
// /proc/<pid>/io of this process' descendants, so it needs nothing from the adapter.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <thread>

namespace dugong::adm {

// Bytes written by the live descendants of `ancestor` (`wchar` in /proc/<pid>/io).
uint64_t bytesWrittenByDescendants(pid_t ancestor);
// "1.2 GB", "830.0 MB", "512 B".
std::string humanBytes(double bytes);

class RebuildProgress {
 public:
  // Starts printing to `out` when `enabled` (stdout is a terminal); else does nothing.
  RebuildProgress(std::ostream& out, bool enabled);
  // Stops and ends the line.
  ~RebuildProgress();
  RebuildProgress(const RebuildProgress&) = delete;
  RebuildProgress& operator=(const RebuildProgress&) = delete;

 private:
  void run();

  std::ostream& out_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dugong::adm
