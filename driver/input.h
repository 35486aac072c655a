// What the driver's core (driver/core.h) is told: everything that happens to the agent,
// as values. The runner (driver/driver.h) turns the environment's callbacks, timers and
// completions into these, and a transcript (driver/testdata/) writes them by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "statemachine/rejoin_policy.h"
#include "driver/failsafe.h"
#include "driver/sync_ack_watch.h"
#include "driver/types.h"
#include "statemachine/action.h"
#include "statemachine/cluster_state.h"
#include "statemachine/data_state.h"
#include "statemachine/event.h"
#include "statemachine/identity.h"
#include "statemachine/pg_config.h"
#include "statemachine/result.h"
#include "statemachine/time_format.h"

namespace dugong::driver {

// The timers the core owns. kStateMachine carries the state machine's own TimerId.
enum class TimerKind {
  kStateMachine,
  kHealth,        // an unhealthy postgres is looked at again
  kWithdrawal,    // a withdrawn peer joins again
  kWrites,        // stopping writes, resuming them or confirming the state is tried again
  kShutDown,      // postgres is shut down (half-way to a session's expiry, or again)
  kLease,         // writes stop a little before the end of writes
  kLeaseShut,     // postgres is shut down at the end of writes
  kFailsafe,      // the primary asks its sync for a promise
  kHeldTakeover,  // a takeover held back by a promise goes ahead
  kPeerGrace,     // peers present before an outage count as present until then
  kRejoin,        // the automatic rejoin is tried again
  kHandover,      // a switchover that did not happen is given up
  kDataState,     // the data state is read again
  kSyncWatch,     // the sync's walsender is sampled
  kStreamWatch,   // whether postgres streams from its upstream is looked at
};

struct TimerKey {
  TimerKind kind = TimerKind::kHealth;
  TimerId id = TimerId::kRetryEvaluation;  // kStateMachine only
  auto operator<=>(const TimerKey&) const = default;
};

// When an input happens, as the core sees it: both clocks, and the facts the core reads
// of postgres rather than being told (the last health check found no postmaster, the
// last look at its WAL receiver).
struct Moment {
  int64_t monoMs = 0;
  EpochMs wallMs = 0;
  bool postmasterGone = false;
  // Postgres::streamSample(): what the last look at postgres saw of its WAL receiver.
  std::optional<StreamSample> stream = std::nullopt;
};

namespace in {

struct Start {};  // Runner::start()
struct Stop {};   // Runner::stop()
// The coordinator's events, and those the core posted to itself (Later).
struct Delivered {
  Event event;
};
struct Connection {
  CoordinatorConnection c;
};
struct Lease {
  CoordinatorLease l;
};
struct JoinRefused {
  std::string error;
};
// Postgres' answers.
struct Initialized {
  PgInitialized e;
  bool afterRebuild = false;
};
struct Applied {
  PgConfig config;
  bool fromPeer = false;  // the state machine asked for it (otherwise a restart or a stop of the driver's)
  PgConfigApplied r;
};
struct Fenced {
  PgFenced r;
};
struct WalRead {
  WalPositionRead r;
};
struct DataStateRead {
  Result<PeerDataState> r = Error{};
};
struct WritesStopped {
  Result<int> r = Error{};
};
struct ShutDown {
  Result<bool> r = Error{};
};
struct WritesResumed {
  bool noTakeoverCanLand = false;
  Result<bool> r = Error{};
};
struct UpstreamStopped {
  std::optional<PeerIdentity> newSync;
  bool ended = false;
};
struct Rejoined {
  PeerIdentity primary;
  RejoinFinished r;
};
struct Health {
  bool healthy = false;
  std::string detail;
};
struct SyncSampled {
  int64_t generation = 0;
  std::string sync;
  Result<SyncReplicationSample> r = Error{};
};
struct MembersSampled {
  int64_t generation = 0;
  std::vector<std::string> members;
  Result<QuorumReplicationSample> r = Error{};
};
// A cluster-state write the core asked for: the state machine's, the confirmation on a
// new session, or leaving `deposed` after a rejoin.
enum class WriteFor { kStateMachine, kConfirmation, kRelease };
struct StateWritten {
  WriteFor purpose = WriteFor::kStateMachine;
  int32_t version = -1;
  StateWriteFinished r;
};
// The coordinator's answer to cmd::PublishReport.
struct ReportPublished {
  dugong::ReportPublished r;
};
struct FailsafeAnswered {
  int64_t sentAt = 0, generation = 0, session = 0;
  Result<FailsafeAnswer> r = Error{};
  std::string from;  // the peer asked (cmd::AskFailsafe::to), which answered
  bool release = false;  // the answer to a release (FailsafeRequest::release)
};
struct FailsafeAsked {
  FailsafeRequest request;
};
struct Timer {
  TimerKey key;
};
// The confirmation the core deferred until the state machine had stepped the answer of
// its own write.

}  // namespace in

using Input = std::variant<in::Start, in::Stop, in::Delivered, in::Connection, in::Lease, in::JoinRefused,
                           in::Initialized, in::Applied, in::Fenced, in::WalRead, in::DataStateRead,
                           in::WritesStopped, in::ShutDown, in::WritesResumed, in::UpstreamStopped, in::Rejoined,
                           in::Health, in::SyncSampled, in::MembersSampled, in::StateWritten, in::ReportPublished, in::FailsafeAnswered,
                           in::FailsafeAsked, in::Timer>;

}  // namespace dugong::driver
