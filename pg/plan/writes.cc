#include "pg/plan/writes.h"

namespace dugong::pg {

bool mustStopWrites(const WritesFacts& facts, bool evenIfDown) {
  if (!evenIfDown && !facts.running) return false;
  return facts.primary;  // a standby accepts no writes
}

bool shutDownStops(bool signalled, bool primaryMarked) { return signalled || primaryMarked; }

WritesShutdown writesShutdownMode() { return WritesShutdown::kImmediate; }

bool mustResumeWrites(const WritesFacts& facts) { return facts.writesStopped; }

WritesMode afterStopWrites(WritesMode mode) {
  return mode == WritesMode::kShutDown ? WritesMode::kShutDown : WritesMode::kStopped;
}

WritesMode afterShutDown(WritesMode) { return WritesMode::kShutDown; }

WritesMode afterResume(WritesMode) { return WritesMode::kOpen; }

PrimaryUnderWrites planPrimaryUnderWrites(WritesMode mode) {
  switch (mode) {
    case WritesMode::kOpen: return {true, false};
    case WritesMode::kStopped: return {true, true};
    case WritesMode::kShutDown: return {false, true};
  }
  return {false, true};
}

const char* writesModeName(WritesMode mode) {
  switch (mode) {
    case WritesMode::kOpen: return "open";
    case WritesMode::kStopped: return "stopped";
    case WritesMode::kShutDown: return "shut down";
  }
  return "?";
}

}  // namespace dugong::pg
