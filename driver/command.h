// What the driver's core (driver/core.h) asks for: every effect on the world, as values,
// in the order they must happen. The runner (driver/driver.h) carries each out through
// the environment (driver/env.h) and answers with an input (driver/input.h) where the
// operation has an answer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "driver/input.h"
#include "statemachine/action.h"
#include "statemachine/peer.h"

namespace dugong::driver {

namespace cmd {

// Postgres (answered by the input named after each).
struct InitPostgres {  // in::Initialized
  bool afterRebuild = false;
};
struct StartHealthCheck {};  // in::Health, for the first result and each change
struct StopHealthCheck {};
struct ApplyPg {  // in::Applied
  PgConfig config;
  bool fromPeer = false;
};
struct FencePg {  // in::Fenced
  std::optional<PeerIdentity> newSync;
  // A primary's membership step (Postgres::fenceQuorum), bounded by timeoutMs.
  std::optional<Quorum> quorum = std::nullopt;
  bool endWalsenders = false;
  int64_t timeoutMs = 0;
};
struct ReadWal {};        // in::WalRead
struct ReadDataState {};  // in::DataStateRead
struct StopWrites {};     // in::WritesStopped
struct ShutDownWrites {};  // in::ShutDown
struct ResumeWrites {      // in::WritesResumed
  bool noTakeoverCanLand = false;
};
struct AwaitUpstreamStop {  // in::UpstreamStopped
  int64_t timeoutMs = 0;
  std::optional<PeerIdentity> newSync;
};
struct Rejoin {  // in::Rejoined
  PeerIdentity primary;
  RejoinPolicy policy = RejoinPolicy::kFollow;
};
struct SampleSync {  // in::SyncSampled
  int64_t generation = 0;
  std::string sync;
};
struct SampleMembers {  // in::MembersSampled
  int64_t generation = 0;
  std::vector<std::string> members;
};
// The driver's own stop (Runner::stop with stopPostgresOnExit): postgres stopped, then
// the stop is done; no input.
struct StopPostgresAndFinish {};
struct Finish {};  // the stop is done (postgres left as it is)

// The coordinator.
struct Join {};  // in::JoinRefused if refused at once; then in::Delivered, in::Connection, in::Lease
struct Leave {
  bool keepingMembership = false;
};
struct PutState {  // in::StateWritten
  ClusterState state;
  int32_t expectedVersion = -1;
  std::string reason;
  in::WriteFor purpose = in::WriteFor::kStateMachine;
  // A quorum takeover's counted reports (WriteClusterState::checks): the write lands only
  // if each election node is still at that version (Coordinator::putCheckedClusterState).
  std::vector<ElectionNodeCheck> checks = {};
};
struct PublishDataState {
  std::optional<PeerDataState> data;
};
struct PublishStreaming {
  bool streams = false;
};
struct PublishReport {  // in::ReportPublished
  std::optional<TakeoverReport> report;  // nullopt: withdrawn
};

// The other agents.
struct AskFailsafe {  // in::FailsafeAnswered
  PeerIdentity to;
  FailsafeRequest request;
  int64_t timeoutMs = 0;
  int64_t sentAt = 0, generation = 0, session = 0;
};
struct AnswerFailsafe {  // the answer to in::FailsafeAsked
  FailsafeAnswer answer;
  // A promise given: its end (monotonic ms), recorded (DriverOptions::recordPromise)
  // before the answer goes out; if it cannot be, the answer is a refusal.
  std::optional<int64_t> recordUntilMs;
};

// Time and the loop.
struct SetTimer {  // in::Timer after delayMs, replacing an earlier start of the same key
  TimerKey key;
  int64_t delayMs = 0;
};
struct CancelTimer {
  TimerKey key;
};
struct Later {  // in::Delivered{event} on a later turn of the loop
  Event event;
};

// The agent around the driver (DriverOptions' callbacks), and the log.
struct PrimaryApplyStarting {};
struct RoleApplied {
  Role previous = Role::kUnknown, applied = Role::kUnknown;
};
struct PrimaryConnectionLoss {
  bool lost = false;
};
struct LeaseDeadline {
  int64_t deadlineMs = 0;
};
struct Log {
  LogLevel level = LogLevel::kInfo;
  std::string line;
};
struct Fatal {  // Runner::onFatal's callback, on a later turn of the loop
  std::string reason;
};

}  // namespace cmd

using Command =
    std::variant<cmd::InitPostgres, cmd::StartHealthCheck, cmd::StopHealthCheck, cmd::ApplyPg, cmd::FencePg, cmd::ReadWal,
                 cmd::ReadDataState, cmd::StopWrites, cmd::ShutDownWrites, cmd::ResumeWrites, cmd::AwaitUpstreamStop,
                 cmd::Rejoin, cmd::SampleSync, cmd::SampleMembers, cmd::StopPostgresAndFinish, cmd::Finish, cmd::Join, cmd::Leave,
                 cmd::PutState, cmd::PublishDataState, cmd::PublishStreaming, cmd::PublishReport, cmd::AskFailsafe, cmd::AnswerFailsafe, cmd::SetTimer,
                 cmd::CancelTimer, cmd::Later, cmd::PrimaryApplyStarting, cmd::RoleApplied,
                 cmd::PrimaryConnectionLoss, cmd::LeaseDeadline, cmd::Log, cmd::Fatal>;

}  // namespace dugong::driver
