#include "tools/adm/verify.h"

#include <algorithm>

#include "statemachine/promote_request.h"
#include "tools/adm/hot_standby_rollout.h"
#include "tools/adm/standby_view.h"
#include "tools/adm/table.h"

namespace dugong::adm {
namespace {

class Checker {
 public:
  void ok(std::string text) { out_.push_back({false, std::move(text)}); }
  void problem(std::string text) { out_.push_back({true, std::move(text)}); }
  void check(bool good, std::string okText, std::string problemText) {
    good ? ok(std::move(okText)) : problem(std::move(problemText));
  }
  std::vector<Finding> take() { return std::move(out_); }

 private:
  std::vector<Finding> out_;
};

std::string freezeText(const nlohmann::json& freeze) {
  if (!freeze.is_object()) return "frozen";
  std::string t = "frozen";
  if (auto d = freeze.find("date"); d != freeze.end() && d->is_string()) t += " since " + d->get<std::string>();
  if (auto r = freeze.find("reason"); r != freeze.end() && r->is_string()) t += ": " + r->get<std::string>();
  return t;
}

// In ZooKeeper, agent answering, postgres online. Returns whether all three hold.
bool checkPresent(Checker& c, const PeerView& p, const std::string& what) {
  const std::string name = what + " " + p.identity.id;
  if (!p.active) {
    c.problem(name + " is not in ZooKeeper (its agent is down or cut off)");
    return false;
  }
  if (!p.reachable()) {
    c.problem(name + ": its agent does not answer" + (p.agentError.empty() ? "" : " (" + p.agentError + ")"));
    return false;
  }
  if (!pgOnline(p)) {
    c.problem(name + ": postgres is not accepting connections");
    return false;
  }
  c.ok(name + " is in ZooKeeper, its agent answers and postgres is online");
  if (p.status.contains("peer") && p.status["peer"].is_object() && p.status["peer"].contains("halted")) {
    c.problem(name + ": its state machine is halted: " + p.status["peer"]["halted"].dump());
  }
  return true;
}

// A standby whose hot-standby settings (pg/hot_standby.h) are below its primary's, as
// both publish them (postgres.hotStandbyValues in /state): postgres pauses its replay
// when it reaches the primary's change, and refuses to start it (operator review P12,
// P15). Not judged when either publishes none.
void checkHotStandbyFloor(Checker& c, const ClusterView& view, const PeerView& p, const std::string& name) {
  const PeerView* primary = view.find(view.state.primary.id);
  if (primary == nullptr || !primary->reachable()) return;
  const auto theirs = runningHotStandbyValues(*primary);
  std::string below;
  for (const auto& [setting, value] : runningHotStandbyValues(p)) {
    const auto at = theirs.find(setting);
    if (at == theirs.end() || value >= at->second) continue;
    below += (below.empty() ? "" : ", ") + setting + " = " + std::to_string(value) + ", below the primary " +
             primary->identity.id + "'s " + std::to_string(at->second);
  }
  if (below.empty()) return;
  c.problem(name + " runs " + below +
            ": postgres pauses its replay when it reaches the primary's values, and would not start it so "
            "(`dugong-adm restart " + p.identity.id +
            "`: its agent raises them to the primary's values its pg_control holds; a host whose "
            "postgres.settings set them lower must raise them)");
}

// What a standby's upstream must report as its sync_state: "sync" for Manatee's sync,
// "quorum" for a member of an `ANY k (...)` set, nothing for an async. `step`: the
// membership step the primary has in flight ("" none): a member's sync_state that
// differs while one runs is the step's doing, noted, not a problem.
struct Synchronous {
  std::string syncState;
  std::string step;
};

void checkStreaming(Checker& c, const ClusterView& view, const PeerView& p, const Synchronous& expected,
                    const VerifyOptions& o) {
  const bool synchronous = !expected.syncState.empty();
  const PeerView* up = view.upstreamOf(p.identity.id);
  const std::string name = p.roleLabel(true) + " " + p.identity.id;
  if (!up) {
    c.problem(name + " has no upstream in the state");
    return;
  }
  if (!up->reachable()) {
    c.problem(name + ": cannot tell whether it streams: its upstream " + up->identity.id + " does not answer");
    return;
  }
  auto row = replicationRow(*up, p.identity.id);
  if (!row) {
    c.problem(name + " is not streaming from " + up->identity.id);
    return;
  }
  std::string state = row->value("state", std::string());
  std::string syncState = row->value("syncState", std::string());
  if (state != "streaming") {
    c.problem(name + " is connected to " + up->identity.id + " but " + (state.empty() ? "not streaming" : state));
    return;
  }
  if (synchronous && syncState != expected.syncState && !expected.step.empty()) {
    c.ok(name + " streams from " + up->identity.id + " with sync_state " + syncState +
         " while a membership step is in flight (" + expected.step + ")");
  } else if (synchronous && syncState != expected.syncState) {
    c.problem(name + " streams from " + up->identity.id + " but not synchronously (sync_state " + syncState +
              (expected.syncState == "sync" ? "" : ", not " + expected.syncState) + ")");
    return;
  } else {
    c.ok(name + " streams from " + up->identity.id + (synchronous ? " synchronously" : "") +
         (expected.syncState == "quorum" ? " (sync_state quorum)" : ""));
  }
  if (replayPaused(p)) {
    c.problem(name + ": its replay is paused: it receives WAL but applies none" +
              std::string(synchronous ? ", and a takeover by it waits until replay ends" : "") +
              " (a hot-standby setting lower than the primary's pauses it: see its postgres log; else `SELECT "
              "pg_wal_replay_resume()` on it)");
  }
  checkHotStandbyFloor(c, view, p, name);
  auto lag = lagBytes(*up, p.identity.id);
  if (!lag) {
    c.problem(name + ": its lag behind " + up->identity.id + " is unknown");
  } else {
    c.check(*lag <= o.maxLagBytes, name + " lags " + std::to_string(*lag) + " bytes behind " + up->identity.id,
            name + " lags " + std::to_string(*lag) + " bytes behind " + up->identity.id + " (more than " +
                std::to_string(o.maxLagBytes) + ")");
  }
}

// The membership step a quorum-mode primary has in flight (its /state's
// peer.quorum.step), "" when none or not said.
std::string stepInFlight(const PeerView& primary) {
  if (!primary.reachable()) return "";
  const nlohmann::json peer = primary.status.value("peer", nlohmann::json::object());
  if (!peer.is_object() || !peer.contains("quorum") || !peer["quorum"].is_object()) return "";
  const nlohmann::json& step = peer["quorum"].contains("step") ? peer["quorum"]["step"] : nlohmann::json();
  return step.is_string() ? step.get<std::string>() : "";
}

// "ANY 1 (b, d)".
std::string ruleText(int k, const std::vector<std::string>& ids) {
  return "ANY " + std::to_string(k) + " (" + joinWithCommas(ids) + ")";
}

// The rule the primary's postgres runs against the state's (0079 section 6.5): the rule
// its agent last applied and verified (its /state's peer.pg.applied.quorum; the
// synchronous_standby_names the agent rendered from it), and pg_stat_replication's
// sync_state per name, postgres's own account of the names it counts: a member
// streaming with sync_state other than quorum (checked per member), or a peer outside
// the set counted as one. A difference while a membership step is in flight is the
// step's (noted); otherwise a problem. Then whether k members acknowledge at all.
void checkQuorumRule(Checker& c, const ClusterView& view, const PeerView& primary, const std::string& step) {
  const Quorum& q = *view.state.quorum;
  std::vector<std::string> wanted;
  for (const auto& m : q.members) wanted.push_back(m.id);
  const std::string name = "primary " + primary.identity.id;
  const std::string stateRule = ruleText(q.k, wanted);
  if (!primary.reachable()) return;  // checkPresent said so
  const nlohmann::json peer = primary.status.value("peer", nlohmann::json::object());
  const nlohmann::json pg = peer.is_object() ? peer.value("pg", nlohmann::json::object()) : nlohmann::json::object();
  const nlohmann::json applied = pg.is_object() ? pg.value("applied", nlohmann::json()) : nlohmann::json();
  auto differs = [&](const std::string& what) {
    if (!step.empty()) {
      c.ok(name + ": " + what + " while a membership step is in flight (" + step + ")");
    } else {
      c.problem(name + ": " + what + " (its agent applies the state's rule; its log says why it has not)");
    }
  };
  if (!applied.is_object() || !applied.contains("quorum") || !applied["quorum"].is_object()) {
    differs("its postgres runs no quorum rule (its agent applied " +
            (applied.is_object() ? applied.value("role", std::string("no role")) + " without one"
                                 : std::string("nothing yet")) +
            "), the state says " + stateRule);
  } else {
    const nlohmann::json& a = applied["quorum"];
    std::vector<std::string> ids;
    for (const auto& m : a.value("members", nlohmann::json::array())) {
      ids.push_back(m.is_object() ? m.value("id", std::string("?")) : m.dump());
    }
    const std::string runs = ruleText(a.value("k", 0), ids);
    if (runs == stateRule) {
      c.ok(name + "'s postgres runs the state's rule " + stateRule);
    } else {
      differs("its postgres runs " + runs + ", the state says " + stateRule);
    }
  }
  const nlohmann::json postgres = primary.status.value("postgres", nlohmann::json::object());
  const nlohmann::json rows =
      postgres.is_object() ? postgres.value("replication", nlohmann::json::array()) : nlohmann::json::array();
  int acknowledging = 0;
  for (const auto& r : rows.is_array() ? rows : nlohmann::json::array()) {
    const std::string app = r.value("applicationName", std::string());
    const std::string syncState = r.value("syncState", std::string());
    const bool isMember = containsPeer(q.members, app);
    if (isMember && syncState == "quorum" && r.value("state", std::string()) == "streaming") ++acknowledging;
    if (!isMember && syncState != "async" && !syncState.empty()) {
      differs("its postgres counts " + app + "'s acknowledgements (sync_state " + syncState + "), which is not a member");
    }
  }
  c.check(acknowledging >= q.k,
          name + ": " + std::to_string(acknowledging) + " of the " + std::to_string(q.members.size()) +
              " members acknowledge, a commit waits for " + std::to_string(q.k),
          name + ": only " + std::to_string(acknowledging) + " of the " + std::to_string(q.members.size()) +
              " members stream with sync_state quorum, and a commit waits for " + std::to_string(q.k) +
              ": commits stall until the primary adds a member or one streams again");
}

// WAL archiving on the primary (pg_stat_archiver in its /state), when archive_mode is on.
void checkArchiving(Checker& c, const PeerView& primary) {
  if (!primary.status.contains("postgres") || !primary.status["postgres"].contains("archiver")) return;
  const nlohmann::json& a = primary.status["postgres"]["archiver"];
  if (!a.is_object()) return;
  const std::string name = "primary " + primary.identity.id;
  if (!a.value("failing", false)) {
    c.ok(name + " archives its WAL (" + std::to_string(a.value("archived", 0LL)) + " segments archived)");
    return;
  }
  std::string text = name + " cannot archive its WAL: archive_command failed " +
                     std::to_string(a.value("failed", 0LL)) + " times";
  if (a.contains("lastFailedWal") && a["lastFailedWal"].is_string()) {
    text += ", last on segment " + a["lastFailedWal"].get<std::string>();
  }
  c.problem(text + "; WAL accumulates in pg_wal until it is archived (check the repository, backup.* in "
                   "`dugong-adm config show`, and pgBackRest's log)");
}

// The names of a JSON array, joined by commas.
std::string joinedNames(const nlohmann::json& names) {
  std::vector<std::string> items;
  for (const auto& n : names) items.push_back(n.is_string() ? n.get<std::string>() : n.dump());
  return joinWithCommas(items);
}

std::string peerName(const PeerView& p) {
  return (p.role == "unassigned" ? std::string("peer") : p.roleLabel(true)) + " " + p.identity.id;
}

// A peer that does not run the cluster's configuration (its /state's clusterConfig,
// agent/cluster_config_follower.h): its agent refused the newest version (its postgres
// runs the last one applied), or its host's own postgres.settings override some of the
// cluster's settings (operator review P5).
void checkClusterConfig(Checker& c, const PeerView& p) {
  if (!p.reachable()) return;
  const auto config = p.status.find("clusterConfig");
  if (config == p.status.end() || !config->is_object()) return;
  const auto shadowed = config->find("shadowed");
  if (shadowed != config->end() && shadowed->is_array() && !shadowed->empty()) {
    c.problem(peerName(p) + " does not run the cluster's " + joinedNames(*shadowed) + ": its dugong.yaml sets " +
              (shadowed->size() == 1 ? "it" : "them") +
              " too (postgres.settings), and the host's value is the one in effect there");
  }
  const auto refused = config->find("refused");
  if (refused == config->end() || !refused->is_string()) return;
  const auto applied = config->find("appliedVersion");
  c.problem(peerName(p) + " refused the cluster's configuration " + refused->get<std::string>() + "; its postgres runs " +
            (applied != config->end() && applied->is_number_integer()
                 ? "version " + std::to_string(applied->get<int64_t>())
                 : std::string("none of the cluster's configurations yet")) +
            " (`dugong-adm config show`, `dugong-adm config history`)");
}

// A peer whose postgres has settings that wait for a restart (pg_settings'
// pending_restart, its /state's postgres.pendingRestart) does not run its configuration.
void checkPendingRestart(Checker& c, const PeerView& p) {
  if (!p.reachable() || !p.status.contains("postgres")) return;
  const nlohmann::json pending = p.status["postgres"].value("pendingRestart", nlohmann::json::array());
  if (!pending.is_array() || pending.empty()) return;
  c.problem(peerName(p) + " does not run its configuration yet: " + joinedNames(pending) +
            (pending.size() == 1 ? " waits" : " wait") + " for a restart of its postgres (`dugong-adm restart --pending`)");
}

}  // namespace

std::vector<Finding> verifyCluster(const ClusterView& view, const VerifyOptions& o) {
  Checker c;
  const ClusterState& s = view.state;

  c.check(!s.frozen(), "the cluster is not frozen", "the cluster is " + freezeText(s.freeze));
  if (s.oneNodeWriteMode) c.ok("one-node-write mode: the primary writes alone, without a sync");
  if (s.hasPromote()) {
    auto req = validatePromote(s.promote, s, view.now);
    c.check(req.ok(), "a promote request is pending: " + s.promote.dump(),
            "stale promote request (" + (req.ok() ? std::string() : req.error()) +
                "): remove it with `dugong-adm clear-promote`");
  }

  if (isStandbyCluster(view)) {
    // Its "primary" is a standby leader: in recovery, receiving from the source.
    for (auto& [problem, text] : verifyStandbyLeader(view)) problem ? c.problem(text) : c.ok(text);
  } else if (const PeerView* primary = view.find(s.primary.id)) {
    if (checkPresent(c, *primary, "primary")) {
      c.check(pgWritable(*primary), "primary " + primary->identity.id + " is writable",
              "primary " + primary->identity.id + " is not writable");
      checkArchiving(c, *primary);
      if (s.quorum) checkQuorumRule(c, view, *primary, stepInFlight(*primary));
    }
  }
  const PeerView* primary = view.find(s.primary.id);
  const std::string step = s.quorum && primary ? stepInFlight(*primary) : "";
  for (const auto& p : view.peers) {
    if (p.role == "sync" || p.role == "async") {
      // Nothing in a standby cluster is synchronous (docs/decisions/0083 P2); a member of
      // a quorum set streams with sync_state quorum (docs/decisions/0079).
      Synchronous expected;
      if (p.role == "sync" && !s.standby) expected = {p.member() ? "quorum" : "sync", p.member() ? step : ""};
      if (checkPresent(c, p, p.roleLabel(true))) checkStreaming(c, view, p, expected, o);
    } else if (p.role == "deposed" && !p.reachable()) {
      // A deposed peer rejoins by itself only while its agent runs.
      c.problem("deposed peer " + p.identity.id + " does not serve and its agent does not answer" +
                (p.agentError.empty() ? "" : " (" + p.agentError + ")") +
                ": start its agent first (with rejoin: rewind, the default, it then rejoins by itself); if it "
                "cannot, `dugong-adm rebuild` on that peer, or `dugong-adm reap " + p.identity.id +
                "` if it is gone for good");
    } else if (p.role == "deposed") {
      const std::string failed = lastRejoinError(p);
      c.problem("deposed peer " + p.identity.id +
                (failed.empty()
                     ? " does not serve yet: its agent rejoins it by itself (rejoin: rewind, the default; its log says "
                       "why if it cannot)"
                     : " could not rejoin by itself: " + failed + "; its agent tries again") +
                "; otherwise `dugong-adm rebuild` on that peer, or `dugong-adm reap " + p.identity.id +
                "` if it is gone for good");
    } else if (p.role == "unassigned") {
      c.problem("peer " + p.identity.id + " is in ZooKeeper but has no role in the state yet");
    }
    checkClusterConfig(c, p);
    checkPendingRestart(c, p);
  }
  if (!s.oneNodeWriteMode && !s.sync && !s.quorum) c.problem("the state has no sync");
  if (!s.oneNodeWriteMode && s.sync && s.async.empty()) {
    c.problem("there is no async: if the primary fails, the sync cannot take over (an async must be present to "
              "become the new sync)");
  }
  // Tags as the peers publish them now (their election nodes).
  auto tagged = [&](const PeerIdentity& p) {
    const int i = indexOfPeer(view.active, p.id);
    return i >= 0 && view.active[static_cast<size_t>(i)].tags.nofailover;
  };
  if (!s.oneNodeWriteMode && s.sync && tagged(*s.sync)) {
    c.problem("the sync " + s.sync->id + " is tagged nofailover: if the primary fails, nobody takes over (promote "
              "async[0] to sync: `dugong-adm promote -r async`)");
  }
  if (!s.oneNodeWriteMode && s.sync && !s.async.empty() && std::all_of(s.async.begin(), s.async.end(), tagged)) {
    c.problem("every async is tagged nofailover: if the primary fails, the sync cannot take over (no async can "
              "become the new sync)");
  }
  return c.take();
}

}  // namespace dugong::adm
