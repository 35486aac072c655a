// restart [ID | --rolling | --pending] [--scheduled TIME], reload [ID]: an operator's
// request to agents to restart or reload their postgres (agent/operator_request.h). Each request is written at
// <root>/requests/<id>; the agent answers in its /state ("request"); the request node
// is removed once answered. A rolling restart keeps the hot-standby ordering
// (pg/hot_standby.h): standbys first, one at a time, each streaming again before the
// next, then a switchover to the sync (which restarts the old primary as a standby);
// when the new configuration lowers a setting hot standby needs, the primary runs it
// first instead (restarted in place), then the standbys, each only once it has replayed
// the primary's WAL up to where the primary runs the new values (restarted earlier, a
// standby's agent would raise them again to the floor its pg_control still holds). In
// either order, a peer that then runs other hot-standby values than the configuration's
// is reported and the command fails (tools/adm/hot_standby_rollout.h). --pending is the
// rolling restart of only the peers whose postgres reports settings that wait for a
// restart (pg_settings.pending_restart), in the same order. Each step first reads the
// state again: a peer whose role changed since the plan (a takeover between two steps),
// or a new primary, stops the command rather than restart a primary as a standby
// (tools/adm/rolling_restart.h).
#include <unistd.h>

#include <iostream>
#include <thread>

#include "agent/operator_request.h"
#include "pg/cluster_config.h"
#include "pg/plan/hot_standby.h"
#include "pg/managed_conf.h"
#include "tools/adm/commands.h"
#include "tools/adm/hot_standby_rollout.h"
#include "ops/promote_check.h"
#include "tools/adm/rolling_restart.h"
#include "tools/adm/schedule.h"
#include "tools/adm/table.h"

namespace dugong::adm {
namespace {

using namespace std::chrono_literals;

struct RestartArgs {
  std::string id;
  bool rolling = false;
  bool pending = false;
  std::string scheduled;
  int waitSeconds = 300;
};

// Polls the view (agents asked) until `ok(view)` or the timeout; the last view read.
Result<ClusterView> waitView(zk::Client& client, const CommonOptions& common, std::chrono::seconds timeout,
                             const std::function<bool(const ClusterView&)>& ok) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "timed out";
  while (std::chrono::steady_clock::now() < deadline) {
    auto view = fetchView(client, common.cluster, true);
    if (view && ok(*view)) return view;
    if (!view) last = view.error();
    std::this_thread::sleep_for(200ms);
  }
  return Error{last};
}

const nlohmann::json& field(const PeerView* p, std::initializer_list<const char*> path) {
  static const nlohmann::json kNull;
  if (p == nullptr || !p->reachable()) return kNull;
  const nlohmann::json* j = &p->status;
  for (const char* k : path) {
    if (!j->is_object() || !j->contains(k)) return kNull;
    j = &(*j)[k];
  }
  return *j;
}

bool streaming(const ClusterView& v, const std::string& id) {
  return field(v.find(id), {"health", "streamingReplica"}) == true;
}
bool writable(const ClusterView& v, const std::string& id) {
  return field(v.find(id), {"health", "writablePrimary"}) == true;
}

// Writes the request for `id`, waits for its agent's answer, removes the request.
Result<bool> requestAndWait(zk::Client& client, const CommonOptions& common, const std::string& id,
                            const std::string& action, std::chrono::seconds timeout) {
  agent::OperatorRequest r;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  r.id = std::string(host) + "-" + std::to_string(::getpid()) + "-" + std::to_string(nowMs());
  r.action = action;
  r.expireTime = nowMs() + std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  r.by = operatorReason(action + " " + id);
  const std::string path = client.layout().request(id);
  if (auto w = client.setNode(path, r.serialize(), -2); !w) return Error{w.error()};
  std::string outcome, detail;
  auto answered = waitView(client, common, timeout, [&](const ClusterView& v) {
    const auto& req = field(v.find(id), {"request"});
    if (!req.is_object() || req.value("id", "") != r.id || req.value("state", "") == "running") return false;
    outcome = req.value("state", "");
    detail = req.value("detail", "");
    return true;
  });
  (void)client.deleteNode(path);
  if (!answered) return Error{id + " did not answer the " + action + " request within " +
                              std::to_string(timeout.count()) + " s (" + answered.error() + ")"};
  if (outcome != "done") return Error{id + ": " + action + " " + outcome + ": " + detail};
  return true;
}

int restartOne(zk::Client& client, const CommonOptions& common, const std::string& id, const std::string& role,
               std::chrono::seconds timeout) {
  std::cout << "restarting postgres on " << id << " (" << role << ")\n" << std::flush;
  if (auto ok = requestAndWait(client, common, id, "restart", timeout); !ok) return fail(kExitFailed, ok.error());
  auto back = waitView(client, common, timeout, [&](const ClusterView& v) {
    return role == "primary" ? writable(v, id) : streaming(v, id);
  });
  if (!back) return fail(kExitFailed, id + " restarted but is not " +
                                          (role == "primary" ? "writable" : "streaming") + " again: " + back.error());
  std::cout << id << " restarted; " << (role == "primary" ? "writable" : "streaming") << " again\n" << std::flush;
  return kExitOk;
}

// The peers that have not taken the cluster configuration's `version` yet (their /state's
// clusterConfig names neither it applied nor it refused); a peer that publishes no
// clusterConfig cannot tell and is not waited for.
std::vector<std::string> notYetTaken(const ClusterView& v, int32_t version) {
  std::vector<std::string> ids;
  const std::string refusedPrefix = "version " + std::to_string(version) + ":";
  for (const auto& p : v.peers) {
    if (p.role == "deposed" || p.role == "unassigned") continue;
    const nlohmann::json& c = field(&p, {"clusterConfig"});
    if (!c.is_object()) continue;
    const auto appliedVersion = c.find("appliedVersion");
    const auto refusal = c.find("refused");
    const bool refused = refusal != c.end() && refusal->is_string() &&
                         refusal->get<std::string>().rfind(refusedPrefix, 0) == 0;
    const bool applied = appliedVersion != c.end() && appliedVersion->is_number_integer() &&
                         appliedVersion->get<int64_t>() == version;
    // Its postgres' pending restarts are known from a status sample begun after the
    // apply's reload (an agent samples every second; one of an earlier release says
    // neither time).
    const nlohmann::json at = c.value("appliedAt", nlohmann::json());
    const nlohmann::json& sampled = field(&p, {"postgres", "sampledAt"});
    const bool sampledSince = !at.is_number_integer() || !sampled.is_number_integer() ||
                              sampled.get<int64_t>() > at.get<int64_t>();
    if (!refused && !(applied && sampledSince)) ids.push_back(p.identity.id);
  }
  return ids;
}

// Before deciding whom to restart: every peer has taken the cluster configuration's
// current version (an agent applies it once its watch fires). Decided earlier, a
// restart misses what the peers not yet there will wait for: the week test's `config
// set archive_mode=on` followed at once by `restart --pending` restarted only the peer
// that had applied it. Returns the view once they have.
Result<ClusterView> waitUntilConfigTaken(zk::Client& client, const CommonOptions& common, ClusterView view,
                                         std::chrono::seconds timeout) {
  auto node = client.readConfig();
  if (!node) return Error{"cannot read the cluster configuration: " + node.error()};
  if (!node->exists) return view;
  const int32_t version = node->version;
  auto left = notYetTaken(view, version);
  if (left.empty()) return view;
  std::cout << "waiting for " << joinWithCommas(left) << " to apply the cluster configuration version " << version
            << " first\n"
            << std::flush;
  auto taken = waitView(client, common, timeout, [&](const ClusterView& v) {
    left = notYetTaken(v, version);
    return left.empty();
  });
  if (!taken) {
    return Error{joinWithCommas(left) + " did not apply the cluster configuration version " + std::to_string(version) +
                 " within " + std::to_string(timeout.count()) + " s (`dugong-adm verify`); nothing restarted"};
  }
  return taken;
}

// The settings `id`'s postgres reports as waiting for a restart.
std::vector<std::string> pendingSettings(const ClusterView& v, const std::string& id) {
  std::vector<std::string> names;
  for (const auto& n : field(v.find(id), {"postgres", "pendingRestart"})) {
    if (n.is_string()) names.push_back(n.get<std::string>());
  }
  return names;
}

// How long the agents get to publish their restarted postgres' values (they read them
// every second) before a peer that runs other hot-standby values is reported.
constexpr std::chrono::seconds kValuesPublished{10};

// The hot-standby values the cluster's configuration asks for (pg/hot_standby.h).
struct WantedValues {
  std::map<std::string, std::string> settings;  // the cluster's configuration
  std::map<std::string, std::string> defaults;  // dugong's defaults for the rest
};

// Waits until standby `id` has replayed the primary's WAL up to `target`, past any change
// of the primary's hot-standby values that its restart would read from its pg_control;
// a clear refusal once `timeout` passes.
int waitReplayedBeforeRestart(zk::Client& client, const CommonOptions& common, const std::string& id,
                              const std::string& role, WalPosition target, std::chrono::seconds timeout) {
  std::optional<WalPosition> at;
  auto replayed = [&](const ClusterView& v) {
    const PeerView* p = v.find(id);
    if (p != nullptr) at = replayPosition(*p);
    return at && *at >= target;
  };
  auto first = fetchView(client, common.cluster, true);
  if (first && replayed(*first)) return kExitOk;
  std::cout << "waiting for " << role << " " << id << " to replay the primary's WAL up to " << target.toString()
            << " before restarting it (it is at " << (at ? at->toString() : std::string("an unknown position"))
            << "): restarted before it has replayed the primary's hot-standby values, it would keep older ones\n"
            << std::flush;
  if (waitView(client, common, timeout, replayed)) return kExitOk;
  return fail(kExitFailed, replayBoundPassed(id, role, target, at, timeout));
}

// A step of a rolling restart planned on `planned`: `id` is restarted as `role` only
// if it still holds that role under the same primary (tools/adm/rolling_restart.h).
int restartStep(zk::Client& client, const CommonOptions& common, const ClusterState& planned, const std::string& id,
                const std::string& role, std::chrono::seconds timeout) {
  auto now = fetchView(client, common.cluster, false);
  if (!now) return fail(kExitUnavailable, "cannot read the cluster state before restarting " + id + ": " + now.error());
  if (auto changed = roleChangedSince(planned, now->state, id, role)) return fail(kExitFailed, *changed);
  return restartOne(client, common, id, role, timeout);
}

// The end of a rolling restart: every peer it restarted runs the configuration's
// hot-standby values; else the command fails, naming what each runs.
int rollingRestartDone(zk::Client& client, const CommonOptions& common, const WantedValues& wanted,
                       const std::function<bool(const std::string&)>& restartNeeded) {
  std::vector<std::string> wrong;
  auto allRun = [&](const ClusterView& v) {
    wrong.clear();
    for (const auto& p : v.peers) {
      if (p.role == "deposed" || p.role == "unassigned" || !restartNeeded(p.identity.id)) continue;
      if (auto m = hotStandbyMismatches(p, wanted.settings, wanted.defaults); !m.empty()) {
        wrong.push_back(p.role + " " + p.identity.id + " runs " + describeMismatches(m));
      }
    }
    return wrong.empty();
  };
  if (waitView(client, common, kValuesPublished, allRun)) {
    std::cout << "rolling restart done\n";
    return kExitOk;
  }
  std::string text;
  for (const auto& w : wrong) text += (text.empty() ? "" : "; ") + w;
  return fail(kExitFailed, "rolling restart done, but not every peer runs the configured hot-standby values: " + text +
                               " (a standby keeps its primary's higher values until it has replayed their lowering, "
                               "and a host's own postgres.settings override the cluster's: restart that peer again "
                               "with `dugong-adm restart ID`, or check its dugong.yaml)");
}

// Every peer (--rolling), or those with settings pending a restart (--pending), one at a
// time in the hot-standby order. `restartNeeded` says which.
int rollingRestart(zk::Client& client, const CommonOptions& common, const ClusterView& view,
                   std::chrono::seconds timeout, const std::function<bool(const std::string&)>& restartNeeded) {
  const ClusterState& s = view.state;
  // The sync, or in quorum mode the first member (0079): restarted last of the standbys,
  // and the primary's successor when the primary restarts too.
  const PeerIdentity* successor = firstSync(s);
  if (successor == nullptr) {
    return fail(kExitFailed, "no sync in the cluster state: a rolling restart needs one to switch over to");
  }
  const std::string next = successor->id;
  for (const auto& p : view.peers) {
    if (p.role != "deposed" && p.role != "unassigned" && !p.reachable()) {
      return fail(kExitFailed, "the agent of " + p.identity.id + " does not answer (" + p.agentError +
                                   "); nothing restarted");
    }
  }
  // Which way the settings hot standby needs move, against what the primary runs now.
  pg::PgOptions configured;
  if (auto node = client.readConfig(); node && node->exists) {
    if (auto c = pg::ClusterConfig::parse(node->data)) configured.settings = c->settings;
  }
  const WantedValues wanted{configured.settings, pg::defaultSettings(configured)};
  const PeerView* primaryView = view.find(s.primary.id);
  auto lowered = pg::loweredHotStandbySettings(
      wanted.settings, primaryView ? runningHotStandbyValues(*primaryView) : std::map<std::string, long>(),
      wanted.defaults);
  std::vector<std::pair<std::string, std::string>> standbys;  // the end of the chain first
  for (auto it = s.async.rbegin(); it != s.async.rend(); ++it) {
    if (restartNeeded(it->id)) standbys.emplace_back(it->id, "async");
  }
  if (s.quorum) {  // the other members, then the first
    for (auto it = s.quorum->members.rbegin(); it != s.quorum->members.rend(); ++it) {
      if (it->id != next && restartNeeded(it->id)) standbys.emplace_back(it->id, "sync");
    }
  }
  if (restartNeeded(next)) standbys.emplace_back(next, "sync");
  const bool primaryToo = restartNeeded(s.primary.id);
  // What each standby replays before its restart: the primary's WAL as it is now (any
  // change of its values is behind it), or, when the primary restarts first, its WAL
  // once it runs the lowered values.
  std::optional<WalPosition> replayTarget;
  if (primaryView) replayTarget = ownWal(*primaryView);
  if (!lowered.empty() && primaryToo) {
    std::cout << "the configuration lowers " << joinWithCommas(lowered) << " below what the primary runs: restarting the "
              << "primary " << s.primary.id << " first (a standby may not run lower values than its primary), then "
              << "the standbys\n";
    if (int rc = restartStep(client, common, s, s.primary.id, "primary", timeout); rc != kExitOk) return rc;
    std::vector<std::string> still;
    auto runsLowered = waitView(client, common, timeout, [&](const ClusterView& v) {
      const PeerView* p = v.find(s.primary.id);
      if (p == nullptr || !pgWritable(*p)) return false;
      still = pg::loweredHotStandbySettings(wanted.settings, runningHotStandbyValues(*p), wanted.defaults);
      replayTarget = ownWal(*p);
      return still.empty() && replayTarget.has_value();
    });
    if (!runsLowered) {
      return fail(kExitFailed, "the primary " + s.primary.id + " restarted but does not run the lowered " +
                                   joinWithCommas(still.empty() ? lowered : still) + " (does its host's postgres.settings "
                                   "set them?): no standby restarted");
    }
  }
  for (const auto& [id, role] : standbys) {
    if (replayTarget) {
      if (int rc = waitReplayedBeforeRestart(client, common, id, role, *replayTarget, timeout); rc != kExitOk) {
        return rc;
      }
    }
    if (int rc = restartStep(client, common, s, id, role, timeout); rc != kExitOk) return rc;
  }
  if (!lowered.empty() || !primaryToo) return rollingRestartDone(client, common, wanted, restartNeeded);
  // The switchover's own checks read the primary's view of its sync, which the primary's
  // agent polls every second: wait until they pass rather than fail on a view from before
  // the sync's restart (the sync streams again in its own status a moment earlier).
  PromoteArgs check;
  check.id = next;
  check.role = "sync";
  std::string refusal;
  auto ready = waitView(client, common, timeout, [&](const ClusterView& v) {
    auto r = buildPromoteRequest(v, check);
    if (!r) refusal = r.error();
    return r.ok();
  });
  if (!ready) return fail(kExitFailed, "not switching over to the sync " + next + ": " + refusal);
  std::cout << "switching over to the sync " << next << "; the old primary " << s.primary.id
            << " restarts as a standby\n" << std::flush;
  if (int rc = promotePeer(common, next, "sync"); rc != kExitOk) return rc;
  const std::string old = s.primary.id;
  auto back = waitView(client, common, timeout, [&](const ClusterView& v) { return streaming(v, old); });
  if (!back) return fail(kExitFailed, "the old primary " + old + " is not streaming again: " + back.error());
  if (!field(back->find(old), {"postgres", "pendingRestart"}).empty()) {
    if (int rc = restartOne(client, common, old, "standby", timeout); rc != kExitOk) return rc;
  }
  return rollingRestartDone(client, common, wanted, restartNeeded);
}

int runRestart(const CommonOptions& common, const RestartArgs& a) {
  if (int given = (a.rolling ? 1 : 0) + (a.pending ? 1 : 0) + (a.id.empty() ? 0 : 1); given != 1) {
    return fail(kExitUsage, "restart needs one of: a peer ID, --rolling, --pending");
  }
  auto scheduled = parseScheduledOption(a.scheduled, nowMs());
  if (!scheduled) return fail(kExitUsage, scheduled.error());
  const std::optional<EpochMs> at = *scheduled;
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  const std::chrono::seconds timeout(a.waitSeconds);
  auto view = fetchView(*client, common.cluster, true);
  if (!view) return fail(kExitUnavailable, view.error());
  if (!a.id.empty() && view->find(a.id) == nullptr) return fail(kExitUsage, "no peer " + a.id + " in the cluster");
  if (at) {
    client.reset();  // no session kept open while waiting
    const std::string what = a.rolling ? "restart every peer" : a.pending ? "restart the peers with a pending restart"
                                                                          : "restart " + a.id;
    waitUntilScheduled(*at, what);
    client = connectOrFail(common, code);
    if (!client) return code;
    view = fetchView(*client, common.cluster, true);
    if (!view) return fail(kExitUnavailable, view.error());
  }
  if (a.rolling || a.pending) {
    auto taken = waitUntilConfigTaken(*client, common, *view, timeout);
    if (!taken) return fail(kExitFailed, taken.error());
    view = std::move(taken);
  }
  if (a.rolling) return rollingRestart(*client, common, *view, timeout, [](const std::string&) { return true; });
  if (a.pending) {
    std::map<std::string, std::vector<std::string>> pending;
    for (const auto& p : view->peers) {
      if (p.role == "deposed" || p.role == "unassigned") continue;
      if (!p.reachable()) {
        return fail(kExitFailed, "the agent of " + p.identity.id + " does not answer (" + p.agentError +
                                     "): cannot tell whether it waits for a restart; nothing restarted");
      }
      if (auto names = pendingSettings(*view, p.identity.id); !names.empty()) pending[p.identity.id] = names;
    }
    if (pending.empty()) {
      std::cout << "no peer's postgres has settings waiting for a restart: nothing to restart\n";
      return kExitOk;
    }
    for (const auto& p : view->peers) {
      auto it = pending.find(p.identity.id);
      if (it != pending.end()) {
        std::cout << p.identity.id << " (" << p.role << ") needs a restart: " << joinWithCommas(it->second)
                  << " changed and take effect only at a restart\n";
      } else if (p.role != "deposed" && p.role != "unassigned") {
        std::cout << p.identity.id << " (" << p.role << ") runs its configuration: not restarted\n";
      }
    }
    std::cout << std::flush;
    return rollingRestart(*client, common, *view, timeout,
                          [&](const std::string& id) { return pending.count(id) > 0; });
  }
  const PeerView* p = view->find(a.id);
  if (p->role == "primary") {
    std::cout << "warning: " << a.id << " is the primary: writes wait while it restarts (use --rolling for a "
                                        "switchover instead)\n";
  }
  return restartOne(*client, common, a.id, p->role, timeout);
}

int runReload(const CommonOptions& common, const std::string& id, int waitSeconds) {
  int code = kExitOk;
  auto client = connectOrFail(common, code);
  if (!client) return code;
  auto active = client->activePeers();
  if (!active) return fail(kExitUnavailable, active.error());
  std::vector<std::string> ids;
  for (const auto& p : *active) {
    if (id.empty() || p.id == id) ids.push_back(p.id);
  }
  if (ids.empty()) {
    return fail(kExitUsage, id.empty() ? "no peer has a live session" : "no peer " + id + " with a live session");
  }
  int exit = kExitOk;
  for (const auto& peer : ids) {
    if (auto ok = requestAndWait(*client, common, peer, "reload", std::chrono::seconds(waitSeconds)); !ok) {
      exit = fail(kExitFailed, ok.error());
    } else {
      std::cout << peer << ": postgres reloaded\n";
    }
  }
  return exit;
}

}  // namespace

void addRestartCommands(CLI::App& app, const CommonOptions& common, Commands& out) {
  auto a = std::make_shared<RestartArgs>();
  auto* restart = app.add_subcommand("restart", "restart postgres on one peer, or on every peer with --rolling "
                                                "(standbys first, then a switchover to the sync), or on the peers "
                                                "whose settings wait for a restart with --pending");
  restart->add_option("ID", a->id, "the peer whose postgres restarts");
  restart->add_flag("--rolling", a->rolling, "every peer, one at a time, with one switchover");
  restart->add_flag("--pending", a->pending,
                    "only the peers whose postgres reports settings pending a restart (pg_settings.pending_restart), "
                    "in the --rolling order; a primary among them by a switchover to the sync");
  addScheduledOption(restart, a->scheduled);
  restart->add_option("--wait", a->waitSeconds, "seconds to wait for each step")->capture_default_str();
  out.push_back({restart, [&common, a] { return runRestart(common, *a); }});
  auto id = std::make_shared<std::string>();
  auto wait = std::make_shared<int>(60);
  auto* reload = app.add_subcommand("reload", "reload postgres' configuration on one peer, or on every active peer");
  reload->add_option("ID", *id, "the peer (default: every peer with a live session)");
  reload->add_option("--wait", *wait, "seconds to wait for each peer")->capture_default_str();
  out.push_back({reload, [&common, id, wait] { return runReload(common, *id, *wait); }});
}

}  // namespace dugong::adm
