// Closes the C client's handles on a thread of its own, so that no Session destructor
// (and nothing else on the agent's event loop) waits for zookeeper_close: sending the
// close request and joining the client's threads. Internal to zk/, except for
// waitForClosedSessions() (zk/session.h).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "zk/c_client.h"

namespace dugong::zk::detail {

enum class CloseMode {
  // End the session: the server removes its ephemeral nodes at once.
  kEndSession,
  // Keep the session on the server: the handle is left open (no close request is
  // sent) until the process exits, which it is about to do; the kernel then closes the
  // connection, which does not end a ZooKeeper session. The server keeps the session
  // (and its ephemeral nodes) until it expires, for a successor process that re-attaches
  // with its id and password. (The C client has no way to drop a connection without
  // ending its session: pointing the handle at another server does not disconnect it.)
  kKeepSession,
};

// Takes `zh` over and closes it later on the closer's thread. `keepAlive` is released
// after the close (what the handle's callbacks may still touch until then).
void closeLater(zhandle_t* zh, CloseMode mode, std::shared_ptr<void> keepAlive);

// Waits until every handle handed over so far is closed (kEndSession); false on timeout.
bool waitForClosedHandles(std::chrono::milliseconds timeout);

// Tests only: runs on the closer's thread just before each handle is closed.
void setBeforeCloseHookForTest(std::function<void()> hook);

}  // namespace dugong::zk::detail
