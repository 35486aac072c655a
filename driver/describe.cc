#include "driver/describe.h"

#include "statemachine/overloaded.h"

namespace dugong::driver {

namespace {

std::string quorumText(const Quorum& q) { return "quorum=ANY " + std::to_string(q.k) + " " + peerIdList(q.members); }

std::string pgConfigText(const PgConfig& c) {
  std::string s = pgRoleName(c.role);
  if (c.upstream) s += " upstream=" + c.upstream->id;
  if (c.downstream) s += " downstream=" + c.downstream->id;
  if (c.quorum) s += " " + quorumText(*c.quorum);
  if (c.restorePeer && (!c.upstream || c.restorePeer->id != c.upstream->id)) s += " restore=" + c.restorePeer->id;
  return s;
}

std::string stateText(const ClusterState& s) {
  std::string out = "generation=" + std::to_string(s.generation) + " primary=" + s.primary.id;
  if (s.sync) out += " sync=" + s.sync->id;
  if (!s.async.empty()) out += " async=" + peerIdList(s.async);
  if (!s.deposed.empty()) out += " deposed=" + peerIdList(s.deposed);
  if (s.oneNodeWriteMode) out += " one-node-write";
  if (s.quorum) out += " " + quorumText(*s.quorum);
  return out;
}

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

const char* purposeName(in::WriteFor p) {
  switch (p) {
    case in::WriteFor::kStateMachine:
      return "state-machine";
    case in::WriteFor::kConfirmation:
      return "confirmation";
    case in::WriteFor::kRelease:
      return "release";
  }
  return "?";
}

}  // namespace

const char* timerKindName(TimerKind kind) {
  switch (kind) {
    case TimerKind::kStateMachine:
      return "state-machine";
    case TimerKind::kHealth:
      return "health";
    case TimerKind::kWithdrawal:
      return "withdrawal";
    case TimerKind::kWrites:
      return "writes";
    case TimerKind::kShutDown:
      return "shutdown";
    case TimerKind::kLease:
      return "lease";
    case TimerKind::kLeaseShut:
      return "lease-shutdown";
    case TimerKind::kFailsafe:
      return "failsafe";
    case TimerKind::kHeldTakeover:
      return "held-takeover";
    case TimerKind::kPeerGrace:
      return "peer-grace";
    case TimerKind::kRejoin:
      return "rejoin";
    case TimerKind::kHandover:
      return "handover";
    case TimerKind::kDataState:
      return "data-state";
    case TimerKind::kSyncWatch:
      return "sync-watch";
    case TimerKind::kStreamWatch:
      return "stream-watch";
  }
  return "?";
}

std::string describeTimer(const TimerKey& key) {
  if (key.kind == TimerKind::kStateMachine) return std::string("state-machine:") + timerName(key.id);
  return timerKindName(key.kind);
}

std::string describeCommand(const Command& command) {
  return std::visit(
      Overloaded{
          [](const cmd::InitPostgres& c) { return std::string("init-postgres") + (c.afterRebuild ? " after-rebuild" : ""); },
          [](const cmd::StartHealthCheck&) { return std::string("start-health-check"); },
          [](const cmd::StopHealthCheck&) { return std::string("stop-health-check"); },
          [](const cmd::ApplyPg& c) {
            return "apply " + pgConfigText(c.config) + (c.fromPeer ? "" : " (the driver's own)");
          },
          [](const cmd::FencePg& c) {
            std::string s = "fence" + (c.newSync ? " new-sync=" + c.newSync->id : std::string());
            if (c.quorum) {
              s += " " + quorumText(*c.quorum) + (c.endWalsenders ? " end-walsenders" : "") + " within " +
                   std::to_string(c.timeoutMs) + "ms";
            }
            return s;
          },
          [](const cmd::ReadWal&) { return std::string("read-wal"); },
          [](const cmd::ReadDataState&) { return std::string("read-data-state"); },
          [](const cmd::StopWrites&) { return std::string("stop-writes"); },
          [](const cmd::ShutDownWrites&) { return std::string("shut-down-writes"); },
          [](const cmd::ResumeWrites& c) {
            return std::string("resume-writes") + (c.noTakeoverCanLand ? " no-takeover-can-land" : "");
          },
          [](const cmd::AwaitUpstreamStop& c) {
            return "await-upstream-stop " + std::to_string(c.timeoutMs) + "ms" +
                   (c.newSync ? " new-sync=" + c.newSync->id : std::string());
          },
          [](const cmd::Rejoin& c) { return "rejoin " + c.primary.id + " " + rejoinPolicyName(c.policy); },
          [](const cmd::SampleSync& c) {
            return "sample-sync " + c.sync + " generation=" + std::to_string(c.generation);
          },
          [](const cmd::SampleMembers& c) {
            std::string ids;
            for (const std::string& m : c.members) ids += (ids.empty() ? "" : ",") + m;
            return "sample-members " + ids + " generation=" + std::to_string(c.generation);
          },
          [](const cmd::StopPostgresAndFinish&) { return std::string("stop-postgres-and-finish"); },
          [](const cmd::Finish&) { return std::string("finish"); },
          [](const cmd::Join&) { return std::string("join"); },
          [](const cmd::Leave& c) { return std::string("leave") + (c.keepingMembership ? " keeping-membership" : ""); },
          [](const cmd::PutState& c) {
            std::string checks;
            for (const ElectionNodeCheck& k : c.checks) {
              checks += (checks.empty() ? " checks=" : ",") + k.peerId + "@v" + std::to_string(k.version);
            }
            return std::string("put-state ") + purposeName(c.purpose) + " at v" + std::to_string(c.expectedVersion) +
                   " " + stateText(c.state) + checks + ": " + c.reason;
          },
          [](const cmd::PublishDataState& c) {
            return "publish-data-state " + (c.data ? c.data->describe() : std::string("none"));
          },
          [](const cmd::PublishStreaming& c) {
            return std::string("publish-streaming ") + (c.streams ? "true" : "false");
          },
          [](const cmd::PublishReport& c) {
            return "publish-report " + (c.report ? c.report->describe() : std::string("none (withdrawn)"));
          },
          [](const cmd::AskFailsafe& c) {
            const std::string what = c.request.release ? std::string(" release")
                                                       : " duration=" + std::to_string(c.request.durationMs) + "ms";
            return "ask-failsafe " + c.to.id + " generation=" + std::to_string(c.request.generation) + what +
                   " timeout=" + std::to_string(c.timeoutMs) + "ms";
          },
          [](const cmd::AnswerFailsafe& c) {
            return std::string("answer-failsafe ") + (c.answer.granted ? "granted: " : "refused: ") + c.answer.reason;
          },
          [](const cmd::SetTimer& c) { return "set-timer " + describeTimer(c.key) + " " + std::to_string(c.delayMs) + "ms"; },
          [](const cmd::CancelTimer& c) { return "cancel-timer " + describeTimer(c.key); },
          [](const cmd::Later& c) { return "later " + describeEvent(c.event); },
          [](const cmd::PrimaryApplyStarting&) { return std::string("primary-apply-starting"); },
          [](const cmd::RoleApplied& c) {
            return std::string("role-applied ") + roleName(c.previous) + " -> " + roleName(c.applied);
          },
          [](const cmd::PrimaryConnectionLoss& c) {
            return std::string("primary-connection-loss ") + (c.lost ? "lost" : "back");
          },
          [](const cmd::LeaseDeadline& c) { return "lease-deadline " + std::to_string(c.deadlineMs); },
          [](const cmd::Log& c) { return std::string("log ") + levelName(c.level) + ": " + c.line; },
          [](const cmd::Fatal& c) { return "fatal: " + c.reason; },
      },
      command);
}

}  // namespace dugong::driver
