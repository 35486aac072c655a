#include "pg/plan/writes.h"

namespace dugong::pg {

bool mustStopWrites(const WritesFacts& facts, bool evenIfDown) {
  if (!evenIfDown && !facts.running) return false;
  return facts.primary;  // a standby accepts no writes
}

bool shutDownStops(bool signalled, bool primaryMarked) { return signalled || primaryMarked; }

bool mustResumeWrites(const WritesFacts& facts) { return facts.writesStopped; }

}  // namespace dugong::pg
