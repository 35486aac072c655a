#include "statemachine/event.h"

#include "statemachine/overloaded.h"

namespace dugong {

std::string describeEvent(const Event& event, const std::function<std::string(const StateNode&)>& stateText) {
  auto state = [&](const StateNode& s) -> std::string {
    if (stateText) return stateText(s);
    return s.exists ? "v" + std::to_string(s.version) : "none";
  };
  return std::visit(
      Overloaded{
          [&](const ZkInitialized& e) {
            return "zk-initialized active " + peerIdList(e.active) + " state " + state(e.state) +
                   (e.sessionKept ? " (session kept)" : "");
          },
          [&](const ActivePeersChanged& e) { return "active " + peerIdList(e.active); },
          [&](const ClusterStateChanged& e) { return "state " + state(e.state); },
          [&](const PgInitialized& e) {
            return std::string("pg-initialized online=") + (e.online ? "1" : "0") + " setUp=" + (e.setUp ? "1" : "0");
          },
          [&](const PgConfigApplied& e) {
            return std::string("pg-applied ") + (e.ok ? "ok" : "error: " + e.error) + (e.online ? " online" : " offline");
          },
          [&](const PgFenced& e) { return std::string("pg-fenced ") + (e.ok ? "ok" : "error: " + e.error); },
          [&](const StateWriteFinished& e) {
            return e.ok ? "write ok v" + std::to_string(e.newVersion)
                        : "write failed: " + e.error + (e.lostRace ? " (lost race)" : "");
          },
          [&](const WalPositionRead& e) {
            return e.position ? "wal " + e.position->toString() : "wal error: " + e.error;
          },
          [&](const TimerFired& e) { return std::string("timer ") + timerName(e.id); },
          [&](const SyncAcknowledgement& e) {
            return "sync " + e.syncId + (e.acknowledging ? " acknowledges" : " acknowledges nothing: " + e.detail);
          },
          [&](const ReportPublished& e) {
            return e.ok ? "report published v" + std::to_string(e.nodeVersion) : "report publication failed: " + e.error;
          },
          [&](const ReplicationWanted& e) {
            return e.mode == ReplicationMode::kSync ? std::string("replication wanted: sync")
                                                    : "replication wanted: quorum k=" + std::to_string(e.k) +
                                                          " size=" + std::to_string(e.size);
          },
          [&](const SourceObserved& e) {
            if (!e.seen.reachable) return "source unreachable: " + e.seen.lastSeen;
            if (!e.seen.state) return std::string("source reachable, no state");
            const ObservedSourceState& st = *e.seen.state;
            return "source generation " + std::to_string(st.generation) + (st.standby ? " (standby)" : "") +
                   " primary " + st.primary + (e.seen.primaryPresent ? " (present)" : " (absent)") + " sync " +
                   st.sync.value_or("none");
          },
      },
      event);
}

}  // namespace dugong
