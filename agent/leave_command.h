// `dugong --config <yaml> --leave`: stop this peer for good. A stopped agent keeps its
// ZooKeeper session for a restart (agent/session_file.h); this ends that session at
// once, so the peer's election node goes and its peers react now (a sync is replaced,
// a primary's sync takes over), instead of after the session timeout. Then it removes
// the session file. Refused while the agent runs (stop it first).
#pragma once

#include <ostream>

#include "agent/config.h"

namespace dugong::agent {

// Prints what it did (or why it did nothing) to `out`, errors to `err`. Returns the
// process' exit status: 0 done (or nothing to do), 1 failed.
int leaveCluster(const AgentConfig& config, std::ostream& out, std::ostream& err);

}  // namespace dugong::agent
