// The agent's ZooKeeper session: its election node, its watches and its cluster-state
// writes, turned into the state machine's events.
//
// Threading: a Session lives on ONE boost::asio::io_context that runs on one thread
// (the agent's event loop). Every method must be called on that thread, and every
// callback (events, write results) runs there. The C client's threads only post
// into the io_context; they never block and never call back into the agent.
//
// What is delivered, in order, to `onEvent`:
// - ZkInitialized once a session is established and set up: parents created, this
//   peer's election node created, state and election children read with watches.
//   Delivered again after every session expiry, with everything re-read.
// - ClusterStateChanged / ActivePeersChanged when a watch fires and the re-read data
//   differs from what was last delivered (never for data that did not change).
// Connection loss (the session is still valid) produces no event: watches survive
// it, and everything is re-read on reconnection. Writes fail fast while disconnected.
// The optional connection callback (setConnectionCallback) reports it, so that a
// primary can stop accepting writes before its session can expire.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "statemachine/action.h"
#include "statemachine/cluster_state.h"
#include "statemachine/event.h"
#include "statemachine/identity.h"
#include "statemachine/result.h"
#include "statemachine/takeover_report.h"
#include "zk/options.h"

namespace dugong::zk {

// What the agent's status endpoint shows about the session.
struct SessionStatus {
  bool connected = false;    // the handle is connected to a server now
  bool initialized = false;  // ZkInitialized was delivered for the current session
  int64_t sessionId = 0;     // 0 while no session is established
  int sessionsOpened = 0;    // handles opened so far (1 + expiries and failed setups)
  std::string electionNode;  // full path of this peer's election node, once created
  std::string lastError;     // the last problem seen, for operators
  uint64_t requestsSent = 0; // ZooKeeper requests this adapter issued (pings excluded)
  int sessionsLost = 0;      // expiries (and authentication failures) seen
  bool resumed = false;      // the current session was re-attached (options.resume)
  // When the last loss was noticed (the server said so); for status and benchmarks.
  std::chrono::steady_clock::time_point lastSessionLost{};
};

// A change of the connection under an established, initialised session.
struct ConnectionChange {
  // false: the connection is lost; the session may still be valid. The C client notices
  // a silent server after about 2/3 of the negotiated session timeout, so the server can
  // expire the session about 1/3 of the timeout after this report, at the earliest.
  // true: connected again to the same session (its ephemeral node and watches are
  // intact). A new session after an expiry is reported by ZkInitialized instead.
  bool connected = false;
  int64_t sessionId = 0;
  // The negotiated session timeout, in ms.
  int sessionTimeoutMs = 0;
};

// A round trip through the ZooKeeper leader (a `sync`, which the server the client is
// connected to forwards to the leader) answered on the session: the leader was in touch
// with that server after `sentAt`, so the session's expiry clock on the leader counts
// from close to `sentAt` or later (docs/design.md "The primary's lease").
struct LeaseConfirmation {
  std::chrono::steady_clock::time_point sentAt{};  // when the round trip was sent
  int64_t sessionId = 0;
  int sessionTimeoutMs = 0;  // negotiated
  int intervalMs = 0;        // the round trips' interval
};

class Session {
 public:
  using EventCallback = std::function<void(Event)>;
  using WriteCallback = std::function<void(StateWriteFinished)>;

  // REQUIRES: `io` outlives the Session. `onEvent` receives ZkInitialized,
  // ActivePeersChanged and ClusterStateChanged only.
  Session(boost::asio::io_context& io, ZkOptions options, PeerIdentity self, EventCallback onEvent);
  // Ends the session, which removes the election node, unless detach() was called.
  // Never blocks: the handle is closed later on a thread of its own (see
  // waitForClosedSessions). Callbacks of unfinished operations are not called.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Validates the options and opens the first session. Returns an error (and does
  // nothing) for invalid options; connection problems are retried, never returned.
  Result<bool> start();

  // One multi-op: set <root>/state at `expectedVersion` (or create it when
  // expectedVersion == -1) and create <root>/history/<seq> = {time, state, reason?}.
  // `done` runs on the io_context, exactly once (unless the Session is destroyed):
  // - ok with the new version;
  // - lostRace when another writer changed (or created, or deleted) the state first;
  // - an error at once when not connected or when another write is in flight;
  // - when the connection is lost during the write, the outcome is resolved on
  //   reconnection by re-reading the state and comparing bytes; if that does not
  //   happen within options.unknownOutcomeTimeoutMs, an "outcome unknown" failure.
  void putClusterState(const ClusterState& state, int32_t expectedVersion, WriteCallback done,
                       std::string reason = {});
  // The same write with `checks` in the same multi-op (a quorum takeover's counted
  // reports, docs/decisions/0079-quorum-commit.md 4.4): one check per peer, on the
  // election node its reports come from, at that data version. A check that fails (the
  // node changed, or went with its session) fails the write as a lost race, naming the
  // peer; so does a peer with no election node in this session's view, at once.
  void putCheckedClusterState(const ClusterState& state, int32_t expectedVersion,
                              const std::vector<ElectionNodeCheck>& checks, WriteCallback done,
                              std::string reason = {});

  // `onChange` runs on the io_context for each loss and regain of the connection of an
  // initialised session (never for the first connection, nor for a new session after
  // an expiry, which ZkInitialized reports). May be set before or after start().
  void setConnectionCallback(std::function<void(ConnectionChange)> onChange);

  // Sends a leader-confirmed round trip (a `sync`) every options.leaseIntervalFor(the
  // negotiated timeout) while an initialised session is connected, one at a time, and
  // runs `onLease` on the io_context for each that succeeds, with its send time. Set
  // before start().
  void setLeaseCallback(std::function<void(LeaseConfirmation)> onLease);

  // `onSession` runs on the io_context each time a new session is established (not
  // for a reconnection to the same one), with its credentials: what a restarted agent
  // needs to re-attach (options.resume). May be set before or after start().
  void setSessionCallback(std::function<void(SessionCredentials)> onSession);

  // What this peer's data directory holds, published in its election node ("data"
  // beside its identity) until replaced (nullopt: none). Written into the node now if
  // it exists, else when it is created; tried again on reconnection after a failure.
  // Every session delivers the peers' published data states with ZkInitialized and
  // ActivePeersChanged (the election nodes' data is watched). May be set before start().
  void setDataState(std::optional<PeerDataState> data);
  // Publishes in the election node whether this peer's postgres streams ("streaming"),
  // for the choice of a new sync (ZkInitialized::notStreaming).
  void setStreaming(bool streams);
  // Quorum mode: publishes this member's takeover report in its election node ("report",
  // beside its identity, "data" and "streaming"; nullopt: withdrawn) until replaced, in
  // the node of this session and of every later one. `done` runs on the io_context
  // exactly once (unless the Session is destroyed): ok with the node's data version once
  // the node holds it; a failure when no session is set up and connected, when the
  // write failed (the node may hold either; it is written again on reconnection), or
  // when a later call replaced it. Every session delivers the peers' reports, each with
  // its node's data version, in ZkInitialized and ActivePeersChanged (`reports`). A
  // session re-attached by a restarted agent (options.resume) keeps the report and the
  // streaming flag its node holds until this run publishes its own.
  void publishReport(std::optional<TakeoverReport> report, std::function<void(ReportPublished)> done);

  // Watches the node at `path` (absolute: e.g. Layout::config()): `onChange` runs on the
  // io_context with its content (exists=false when absent) once each session is set up
  // and then whenever it differs from what was last delivered. May be set before start().
  void watchNode(const std::string& path, std::function<void(StateNode)> onChange);

  // Stops, keeping the session on the server, for a process about to exit (an agent
  // restart): no close request is ever sent; the handle stays open, unused, until the
  // process exits, and the kernel's closing of its connection does not end the session.
  // The election node therefore stays until the session expires, unless a successor
  // re-attaches first (options.resume). Nothing is called back afterwards. Never blocks.
  // REQUIRES: the process exits soon (while the handle is open, it keeps the session
  // alive, and a successor in another process would have to take it over).
  void detach();

  SessionStatus status() const;
  // The current session's credentials, once established.
  std::optional<SessionCredentials> credentials() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Waits until every handle of destroyed Sessions is closed (detached ones are never);
// false on timeout. For a process about to exit, off its event loop.
bool waitForClosedSessions(std::chrono::milliseconds timeout);

}  // namespace dugong::zk
