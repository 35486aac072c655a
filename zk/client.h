// A small blocking ZooKeeper client for tools (dugong-adm) and tests: read the cluster
// state, the active peers and the history, and write the state with a test-and-set.
// Not for the agent's event loop (every call blocks); use Session there.
//
// Thread-safety: one thread at a time. Every call is bounded by the timeout given to
// connect(): while the connection is down, a call waits at most that long for the
// client to reconnect, then fails with "not connected".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "statemachine/cluster_state.h"
#include "statemachine/event.h"
#include "statemachine/identity.h"
#include "statemachine/result.h"
#include "zk/layout.h"
#include "zk/options.h"

namespace dugong::zk {

// One child of <root>/election, as found.
struct ElectionEntry {
  std::string node;   // "db1-0000000042"
  int64_t sequence = 0;
  int64_t ephemeralOwner = 0;  // the owning session id
  std::string data;   // identity JSON
  std::optional<PeerIdentity> identity;  // when data is a valid identity
};

class Client {
 public:
  // Opens a session and waits for it, up to `timeout`; the same timeout bounds every
  // later call. Validates the options first.
  static Result<std::unique_ptr<Client>> connect(const ZkOptions& options,
                                                 std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Layout& layout() const { return layout_; }
  int64_t sessionId() const;

  // The state node: exists=false when it does not exist.
  Result<StateNode> readState();
  // Election children in session order, including ones with invalid data.
  Result<std::vector<ElectionEntry>> electionNodes();
  // The peers with a live session, in session order (as a Session delivers them).
  Result<PeerList> activePeers();
  // History records, oldest first.
  Result<std::vector<HistoryEntry>> history();

  // Test-and-set write of a valid state plus its history record, in one multi-op
  // (expectedVersion -1: create). Same outcomes as Session::putClusterState.
  StateWriteFinished putState(const ClusterState& state, int32_t expectedVersion, const std::string& reason = {});
  // The same with raw bytes, not validated: for tests and repairs.
  StateWriteFinished putStateBytes(std::string_view bytes, int32_t expectedVersion, const std::string& reason = {});
  // The cluster-wide configuration node (Layout::config): exists=false when never written.
  Result<StateNode> readConfig();
  // Test-and-set write of the configuration bytes plus a <root>/config-history record, in
  // one multi-op (expectedVersion -1: create). The caller validates the bytes first.
  StateWriteFinished putConfigBytes(std::string_view bytes, int32_t expectedVersion, const std::string& reason = {});
  // Configuration history records, oldest first.
  Result<std::vector<HistoryEntry>> configHistory();
  // Any node under the root (a request node): exists=false when absent.
  Result<StateNode> readNode(const std::string& path);
  // Sets the node's data at `expectedVersion` (-1: creates it, failing if it exists;
  // -2: creates or overwrites, whatever its version).
  Result<int32_t> setNode(const std::string& path, std::string_view bytes, int32_t expectedVersion);
  // Deletes the node (any version); a node already gone is not an error.
  Result<bool> deleteNode(const std::string& path);

  // Deletes the state node at `expectedVersion` (-1: any): for tests and repairs (an
  // operator starting a cluster over). Its history is kept.
  Result<bool> deleteState(int32_t expectedVersion);
  // Creates the persistent nodes (root, election, history) that are missing.
  Result<bool> ensureLayout();

  struct Handle;

 private:
  Client(ZkOptions options, std::unique_ptr<Handle> handle, std::chrono::milliseconds timeout);
  Result<bool> requireConnected() const;
  Result<StateNode> read(const std::string& path);
  Result<std::vector<HistoryEntry>> records(const std::string& dir);
  StateWriteFinished putWithHistory(const std::string& path, const std::string& historyPrefix, std::string_view bytes,
                                    int32_t expectedVersion, const std::string& reason);

  ZkOptions options_;
  Layout layout_;
  std::unique_ptr<Handle> handle_;
  std::chrono::milliseconds timeout_;
};

// Takes over the session with these credentials on a second handle and closes it, so
// the server ends the session at once (its ephemeral nodes go). The session's own client
// may win the session back by reconnecting before the close lands; so this repeats
// (bounded) until a further takeover is told the session has expired. Returns when the
// effective close was acknowledged. For tests and benchmarks.
Result<std::chrono::steady_clock::time_point> closeSessionFromOutside(const std::string& connectString, int64_t sessionId, const std::string& password,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace dugong::zk
