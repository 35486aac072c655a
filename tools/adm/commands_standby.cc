// promote-cluster (docs/decisions/0083 section 6; "Phase 3 as built"): a standby cluster
// becomes a normal cluster. dugong-adm judges what the standby cluster sees of its source
// (promoteClusterRefusal, on its leader's last position read of the source), says what
// was received and how far behind, writes the request `standby.promote` test-and-set,
// and follows: the leader fences, asks the source itself and judges again (phase 4: a
// refusal removes the request, its reason in the history), reads, writes the next
// generation as a normal state, then promotes (statemachine/peer_standby.cc).
#include <iostream>
#include <memory>
#include <thread>

#include "ops/http_client.h"
#include "statemachine/standby.h"
#include "statemachine/time_format.h"
#include "tools/adm/commands.h"
#include "tools/adm/replication_change.h"
#include "tools/adm/standby_view.h"
#include "tools/adm/table.h"
#include "zk/source_watch.h"

namespace dugong::adm {
namespace {

struct PromoteClusterArgs {
  bool sourceGone = false;
  int waitSeconds = 120;
};

// A leader's lag sample older than this is not an observation of the source now.
constexpr int64_t kFreshSampleMs = 10'000;

// A dugong source as dugong-adm sees it now (0083 6.1; phase 5 as built): its state and
// election children read over a session of its own to the source's ensemble (read-only),
// as the agents' zk::SourceWatch reads them.
SourceObservation observeDugongSource(const StandbySource& source, int timeoutSeconds) {
  zk::ZkOptions o;
  o.connectString = source.zookeeperConnect();
  o.chroot = source.chroot;
  o.cluster = source.cluster;
  o.root = source.root;
  o.lease = false;
  const std::string now = formatIso8601(nowMs());
  auto client = zk::Client::connect(o, std::chrono::seconds(timeoutSeconds));
  if (!client) return zk::observeSource(Error{client.error()}, Error{client.error()}, "", now);
  auto state = (*client)->readState();
  auto present = (*client)->activePeers();
  return zk::observeSource(state, present, "", now);
}

// What this standby cluster sees of its source, from its leader's /state (the agent
// samples it every second, pg/source_lag.h): a hosts source answered its last position
// read through target_session_attrs=primary only from a writable host. A dugong source
// is read from its ensemble by dugong-adm itself (observeDugongSource).
PromoteClusterView observe(const ClusterView& view, const CommonOptions& common) {
  PromoteClusterView pv;
  pv.cluster = view.cluster;
  pv.root = view.root;
  if (const size_t slash = common.zk.find('/'); slash != std::string::npos) pv.chroot = common.zk.substr(slash);
  const PeerView* leader = view.find(view.state.primary.id);
  pv.leaderPresent = leader && leader->active;
  if (!leader || !leader->reachable()) return pv;
  const nlohmann::json& st = leader->status;
  const nlohmann::json pg = st.value("postgres", nlohmann::json::object());
  pv.leaderRunsAsStandbyLeader = st.value("peer", nlohmann::json::object()).value("role", "") == "standby-leader" &&
                                 pg.value("role", "") == "standby-leader" && pg.value("online", false) &&
                                 pg.value("inRecovery", false);
  if (pg.contains("timeline") && pg["timeline"].is_number_integer()) pv.leaderTimeline = pg["timeline"].get<int64_t>();
  if (view.state.standby && view.state.standby->source.kind == SourceKind::kDugong) {
    pv.source = observeDugongSource(view.state.standby->source, common.timeoutSeconds);
    return pv;
  }
  const nlohmann::json lag = leaderLag(view);
  if (!lag.is_object()) {
    pv.source.lastSeen = "the leader publishes no position of the source";
    return pv;
  }
  pv.source.lastSeen = lag.value("summary", "");
  const int64_t sampledAt = lag.value("sampledAt", int64_t{0});
  const bool fresh = view.now - sampledAt <= kFreshSampleMs;
  pv.source.reachable = fresh && lag.value("sourceReachable", false);
  if (!fresh) pv.source.lastSeen += " (sampled " + std::to_string((view.now - sampledAt) / 1000) + " s ago)";
  if (pv.source.reachable) {
    const std::string host = lag.value("sourcePrimary", "");
    auto hp = HostPort::parse(host);
    pv.source.writableHosts.push_back(hp ? *hp : HostPort{host.empty() ? "?" : host, 0});
  }
  return pv;
}

std::string lagText(const ClusterView& view) {
  const nlohmann::json lag = leaderLag(view);
  return lag.is_object() ? lag.value("summary", "") : std::string("lag unknown: the leader publishes none");
}

// The leader's /primary: 200 once its promoted postgres takes writes.
bool leaderWritable(const ClusterState& s) {
  auto url = agentUrl(s.primary);
  if (!url) return false;
  auto r = agent::httpGet(*url + "/primary", std::chrono::seconds(2));
  return r && r->status == 200;
}

// What promote-cluster and demote-cluster start from: a ZooKeeper client and the view. nullopt, `code` set and the error printed, when either fails.
struct Opened {
  std::unique_ptr<zk::Client> client;
  ClusterView view;
};
std::optional<Opened> openView(const CommonOptions& common, int& code) {
  auto client = connectOrFail(common, code);
  if (!client) return std::nullopt;
  auto view = fetchView(*client, common.cluster, true, std::chrono::seconds(3));
  if (!view) {
    code = fail(kExitUnavailable, view.error());
    return std::nullopt;
  }
  return Opened{std::move(client), std::move(view).value()};
}

// Why the request was removed: the reason of the last history record, which the leader
// wrote with the state that removed it (its own check of the source refused, or the
// request expired or was invalid).
std::string removalReason(zk::Client& client) {
  auto records = client.history();
  if (!records || records->empty()) return "see the leader's log";
  auto j = nlohmann::json::parse(records->back().data, nullptr, false);
  const std::string reason = j.is_object() ? j.value("reason", "") : "";
  return reason.empty() ? std::string("see the leader's log") : reason;
}

int runPromoteCluster(const CommonOptions& common, const PromoteClusterArgs& a) {
  if (a.waitSeconds < 1) return fail(kExitUsage, "--wait must be at least 1 second");
  int code = kExitOk;
  auto opened = openView(common, code);
  if (!opened) return code;
  auto& [client, view] = *opened;
  const ClusterState& s = view.state;
  if (!s.standby) {
    return fail(kExitUsage, "refused: " + (view.cluster.empty() ? view.root : view.cluster) +
                                " is not a standby cluster: there is nothing to promote. Nothing was changed");
  }
  const std::string of = s.standby->source.describe();
  const std::string lag = lagText(view);
  const std::string header = "promote-cluster of " + (view.cluster.empty() ? view.root : view.cluster) +
                             " (source " + of + (a.sourceGone ? ", --source-gone" : "") + "): standby leader " +
                             s.primary.id + ": " + lag;
  if (s.standby->hasPromote()) {
    return fail(kExitUsage, "refused: a promote-cluster request is pending already (" + s.standby->promote.dump() +
                                "). Nothing was changed");
  }
  const PromoteClusterVerdict verdict = promoteClusterRefusal(s, a.sourceGone, observe(view, common));
  if (verdict.refusal) return fail(kExitUsage, header + "\nrefused: " + *verdict.refusal + ". Nothing was changed");
  std::cout << header << "\n";
  if (verdict.waitFor) {
    // The planned case (0083 5.3, 6.2 step 2): the leader promotes once its replay passed
    // the source's demotion point; nothing the source acknowledged is lost.
    std::cout << "lossless: the source was demoted toward this cluster at " << verdict.waitFor->wal.toString()
              << " on timeline " << verdict.waitFor->timeline << "; " << s.primary.id
              << " promotes once it has replayed past it\n";
  }
  std::cout << std::flush;

  const EpochMs expire = nowMs() + static_cast<EpochMs>(a.waitSeconds) * 1000;
  auto written = updateState(
      *client,
      [&](ClusterState& next) -> Result<bool> {
        if (!next.standby || next.generation != s.generation || next.primary.id != s.primary.id) {
          return Error{"the cluster state changed while writing (generation " + std::to_string(next.generation) +
                       "): run promote-cluster again to judge it anew"};
        }
        if (next.standby->hasPromote()) return Error{"a promote-cluster request appeared meanwhile"};
        next.standby->promote = {{"by", operatorReason("promote-cluster")},
                                 {"sourceGone", a.sourceGone},
                                 {"generation", next.generation},
                                 {"expireTime", formatIso8601(expire)}};
        return true;
      },
      operatorReason(std::string("promote-cluster") + (a.sourceGone ? " --source-gone" : "") + ": " + lag), 5);
  if (!written) return fail(kExitFailed, "writing the promote-cluster request: " + written.error());
  std::cout << "request written (state version " << written->version << "); waiting up to " << a.waitSeconds
            << " s for " << s.primary.id << " to promote\n"
            << std::flush;
  std::string last;
  while (nowMs() < expire) {
    auto st = readClusterState(*client);
    if (st && !st->state.standby && st->state.generation > s.generation) {
      const std::string line = "generation " + std::to_string(st->state.generation) + " written: no longer a " +
                               "standby cluster of " + of + "; " + st->state.primary.id + " is primary, initWal " +
                               st->state.initWal.toString() + "; waiting for it to take writes";
      if (line != last) std::cout << line << "\n" << std::flush;
      last = line;
      if (leaderWritable(st->state)) {
        if (common.json) {
          std::cout << nlohmann::json({{"ok", true},
                                       {"generation", st->state.generation},
                                       {"primary", st->state.primary.id},
                                       {"initWal", st->state.initWal.toString()},
                                       {"lagBeforePromotion", lag}})
                           .dump(2)
                    << "\n";
        } else {
          std::cout << st->state.primary.id << " is primary and takes writes; lag before the promotion: " << lag
                    << "\n";
        }
        return kExitOk;
      }
    } else if (st && st->state.standby && !st->state.standby->hasPromote()) {
      return fail(kExitFailed, "the promote-cluster request was removed and the cluster is still a standby "
                               "cluster: " + removalReason(*client));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return fail(kExitFailed, "not promoted within " + std::to_string(a.waitSeconds) +
                               " s (the request expires now): see `dugong-adm show` and the leader's log");
}

struct DemoteClusterArgs {
  std::string source;
  int waitSeconds = 120;
};

// "127.0.0.1:5432" of a peer's pgUrl ("tcp://postgres@127.0.0.1:5432/postgres").
std::optional<HostPort> pgHostPort(const PeerIdentity& p) {
  const size_t at = p.pgUrl.find('@');
  const size_t start = at == std::string::npos ? p.pgUrl.find("://") + 3 : at + 1;
  const size_t slash = p.pgUrl.find('/', start);
  auto h = HostPort::parse(p.pgUrl.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
  if (!h) return std::nullopt;
  return h.value();
}

// What demote-cluster's refusals need, from the view: presence, the primary's walsender
// to its sync (its /state's replication rows), this cluster's postgres addresses.
DemoteClusterView observeForDemotion(const ClusterView& view) {
  DemoteClusterView dv;
  const ClusterState& s = view.state;
  const PeerView* primary = view.find(s.primary.id);
  dv.primaryPresent = primary && primary->active;
  const PeerView* sync = s.sync ? view.find(s.sync->id) : nullptr;
  dv.syncPresent = sync && sync->active;
  if (!primary || !primary->reachable()) {
    dv.syncDetail = "its primary's agent does not answer";
  } else if (auto row = s.sync ? replicationRow(*primary, s.sync->id) : std::nullopt; !row) {
    dv.syncDetail = "not streaming from the primary";
  } else {
    const std::string state = row->value("state", std::string());
    const std::string syncState = row->value("syncState", std::string());
    dv.syncStreams = state == "streaming" && syncState == "sync";
    dv.syncDetail = "state " + state + ", sync_state " + syncState;
  }
  for (const PeerView& p : view.peers) {
    if (auto h = pgHostPort(p.identity)) dv.ownHosts.push_back(*h);
  }
  return dv;
}

// The standby leader's /standby-leader: 200 once it streams from its source.
bool leaderStreams(const ClusterState& s) {
  auto url = agentUrl(s.primary);
  if (!url) return false;
  auto r = agent::httpGet(*url + "/standby-leader", std::chrono::seconds(2));
  return r && r->status == 200;
}

// demote-cluster (0083 5.1; phase 4 as built): a healthy normal cluster becomes a standby
// cluster of `--source`. dugong-adm refuses what demoteClusterRefusal refuses, writes the
// request `demote` test-and-set, and follows: the primary stops postgres, writes the
// standby state (its WAL's end as `demotedAt`), and starts as standby leader of the
// source, rewound if its history forked (statemachine/peer_standby.cc,
// pg/controller_demotion.cc).
int runDemoteCluster(const CommonOptions& common, const DemoteClusterArgs& a) {
  if (a.waitSeconds < 1) return fail(kExitUsage, "--wait must be at least 1 second");
  auto source = parseSourceUrl(a.source);
  if (!source) return fail(kExitUsage, "--source: " + source.error());
  int code = kExitOk;
  auto opened = openView(common, code);
  if (!opened) return code;
  auto& [client, view] = *opened;
  const ClusterState& s = view.state;
  const std::string name = view.cluster.empty() ? view.root : view.cluster;
  auto refusal = demoteClusterRefusal(s, *source, observeForDemotion(view));
  if (!refusal) {  // a standby state is format 3: an older agent would halt on it (0089)
    auto nodes = client->electionNodes();
    if (!nodes) return fail(kExitUnavailable, "reading the election: " + nodes.error());
    if (auto old = peersNotReading(view.active, electionDataById(*nodes), 3); !old.empty()) {
      refusal = joinWithCommas(old) + (old.size() == 1 ? " publishes" : " publish") +
                " no \"stateFormat\" of 3 in the election (an agent older than this dugong): it would halt on the "
                "standby state; upgrade it first";
    }
  }
  if (refusal) {
    return fail(kExitUsage, "demote-cluster of " + name + " toward " + source->describe() + "\nrefused: " +
                                *refusal + ". Nothing was changed");
  }
  std::cout << "demote-cluster of " << name << " (generation " << s.generation << ", primary " << s.primary.id
            << ", sync " << s.sync->id << ") toward " << source->describe() << "\n"
            << std::flush;
  const auto started = std::chrono::steady_clock::now();
  auto seconds = [&started] {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                                 started)
                              .count() /
                          1000.0)
        .substr(0, 5);
  };
  const EpochMs expire = nowMs() + static_cast<EpochMs>(a.waitSeconds) * 1000;
  auto written = updateState(
      *client,
      [&](ClusterState& next) -> Result<bool> {
        if (next.standby || next.generation != s.generation || next.primary.id != s.primary.id) {
          return Error{"the cluster state changed while writing (generation " + std::to_string(next.generation) +
                       "): run demote-cluster again to judge it anew"};
        }
        if (next.hasDemote()) return Error{"a demote-cluster request appeared meanwhile"};
        next.demote = {{"source", source->toJson()},
                       {"by", operatorReason("demote-cluster")},
                       {"generation", next.generation},
                       {"expireTime", formatIso8601(expire)}};
        return true;
      },
      operatorReason("demote-cluster toward " + source->describe()), 5);
  if (!written) return fail(kExitFailed, "writing the demote-cluster request: " + written.error());
  std::cout << "request written (state version " << written->version << "); waiting up to " << a.waitSeconds
            << " s for " << s.primary.id << " to stop, write the standby state and follow the source\n"
            << std::flush;
  bool announced = false;
  while (nowMs() < expire) {
    auto st = readClusterState(*client);
    if (st && st->state.standby && st->state.standby->demotedAt && st->state.generation > s.generation) {
      const ClusterState& d = st->state;
      if (!announced) {
        std::cout << "generation " << d.generation << " written after " << seconds() << " s: a standby cluster of "
                  << d.standby->source.describe() << "; " << d.primary.id << " is standby leader, its WAL ended at "
                  << d.standby->demotedAt->wal.toString() << " on timeline " << d.standby->demotedAt->timeline
                  << "; waiting for it to stream from the source\n"
                  << std::flush;
        announced = true;
      }
      if (leaderStreams(d)) {
        if (common.json) {
          std::cout << nlohmann::json({{"ok", true},
                                       {"generation", d.generation},
                                       {"leader", d.primary.id},
                                       {"demotedAt", d.standby->demotedAt->wal.toString()},
                                       {"timeline", d.standby->demotedAt->timeline},
                                       {"seconds", std::stod(seconds())}})
                           .dump(2)
                    << "\n";
        } else {
          std::cout << d.primary.id << " is standby leader and streams from " << d.standby->source.describe()
                    << " (" << seconds() << " s after the request)\n";
        }
        return kExitOk;
      }
    } else if (st && !st->state.standby && !st->state.hasDemote()) {
      return fail(kExitFailed, "the demote-cluster request was removed and the cluster is still a normal cluster: " +
                                   removalReason(*client));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return fail(kExitFailed, "not demoted and following within " + std::to_string(a.waitSeconds) +
                               " s: see `dugong-adm show` and the primary's log (once postgres is down for it, the "
                               "demotion goes on after the request's expiry)");
}

}  // namespace

void addStandbyCommands(CLI::App& app, const CommonOptions& common, Commands& out) {
  auto a = std::make_shared<PromoteClusterArgs>();
  auto* sub = app.add_subcommand(
      "promote-cluster",
      "make a standby cluster a normal, writable cluster: its standby leader stops following the source, begins a "
      "new generation and promotes. Refused while the source has a writable primary this cluster can reach; "
      "otherwise needs --source-gone (what was not received from the source is lost: the lag is printed first)");
  sub->add_flag("--source-gone", a->sourceGone,
                "the source is gone for good: promote although it cannot be reached (never while it can be seen "
                "writable)");
  sub->add_option("--wait", a->waitSeconds, "seconds to wait for the promotion (the request expires then)")
      ->capture_default_str();
  out.push_back({sub, [&common, a] { return runPromoteCluster(common, *a); }});

  auto d = std::make_shared<DemoteClusterArgs>();
  auto* demote = app.add_subcommand(
      "demote-cluster",
      "make a healthy normal cluster a standby cluster of SOURCE (the old site after the other's promote-cluster): "
      "its primary stops writes and postgres, writes the standby state, and follows the source as standby leader, "
      "rewound with pg_rewind if its history forked (what it wrote past the fork is discarded); its peers follow it");
  demote->add_option("--source", d->source,
                     "what to follow: hosts://host:port[,host:port...] or dugong://zkhost:port[,...]/root")
      ->required();
  demote->add_option("--wait", d->waitSeconds, "seconds to wait for the demotion (the request expires then)")
      ->capture_default_str();
  out.push_back({demote, [&common, d] { return runDemoteCluster(common, *d); }});
}

}  // namespace dugong::adm
