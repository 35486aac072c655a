// The ZooKeeper C client header, with the warnings it trips under our flags silenced
// locally, plus small helpers shared by the async session and the blocking client.
// Internal to zk/.
#pragma once

// The synchronous calls are declared only for the multithreaded library.
#ifndef THREADED
#define THREADED 1
#endif

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wshadow"
#include <zookeeper/zookeeper.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <string>

#include "zk/options.h"

namespace dugong::zk::detail {

// "connection loss (ZCONNECTIONLOSS)": ZooKeeper's own text plus the code's name.
std::string describeRc(int rc);
// A session id as ZooKeeper prints it: "0x1000a3c5e2b0001".
std::string sessionIdText(int64_t id);
// True for the codes after which a request's outcome is unknown.
bool outcomeUnknown(int rc);
// The ACL for nodes the adapter creates: open when no auth is configured, else
// {ALL for the creator's authenticated identity, READ for anyone}.
const ACL_vector* aclFor(const ZkOptions& options);
// Routes the C client's own log lines to spdlog (debug) and sets its level once.
void installClientLogging();
void clientLogLine(const char* message);

}  // namespace dugong::zk::detail
