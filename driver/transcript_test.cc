// The driver core's transcripts (driver/testdata/*.txt): the driver's specification,
// one file per protocol. Inputs written by hand, each followed by the commands the core
// answers with, indented. The test steps a fresh core through each scenario and compares
// what it says with what the file says: every command, every log line. When behaviour
// changes on purpose, DUGONG_REWRITE_TRANSCRIPTS=1 rewrites the files (review the diff).
//
// A scenario starts with its options line: `options id=peer1 [key=value...]` (failsafe=1,
// failsafe-ms, handover-ms, lease-tick-ms, rejoin=follow|rewind|manual, restart-grace-ms,
// sync-replace-ms, sync-sample-ms, sync-connect-grace-ms, withdraw-ms, singleton=1,
// setup-from-data=1, setup-wait-ms, keep-membership=1, stop-postgres-on-exit=1,
// earlier-promise-ms, record-promise=1, peers-reachable=0, quorum=1); a file may hold several,
// each on a fresh core. Then, per step, `at <monotonic ms> <input>`:
//   start | stop
//   initialized online=0|1 setup=0|1     answers init-postgres (after-rebuild as asked)
//   zk-init [v=N] [active=a,b] [state: <state>]
//   state v=N <state>
//       <state>: gen=N primary=a [sync=b] [async=c,d] [deposed=e] [wal=X/Y] [one-node-write]
//                [promote=id,role,gen[,expires at ms]] [quorum=k:m1,m2 (format 2, no sync)]
//                [timeline=N (initTimeline)] [standby=<source url> (format 3)]
//                [promote-cluster=by,<source gone 0|1>,gen,<expires at ms>]
//   active a,b [data=a:<system>/<timeline>/<X/Y>,b:empty] [not-streaming=c,d]
//              [reports=a:<generation>/<timeline>/<X/Y>@<node version>,...]
//   wanted sync|quorum k=N size=N        the replication the agent is configured for
//   source unreachable | source gen=N primary=a [sync=b]   what the agent read of a
//                                     dugong source's ensemble (SourceObserved)
//   connection lost|back [timeout=MS] [session=N]
//   lease sent=MS [session=N] [timeout=MS] [interval=MS]
//   join-refused <error>
//   health ok | health bad <detail> | gone (the postmaster is gone from now on)
//   applied ok|<error> [offline]      answers the last apply asked for
//   fenced ok|<error>                 answers the last fence
//   wal <position> [timeline=N] | wal error <text>   answers read-wal (timeline: its
//                                     history, that timeline with no ancestors)
//   published ok v=N | published <error>   answers the last publish-report
//   data-state ok [setup=1] [system=S] [timeline=N] [wal=X/Y] | data-state <error>
//   written ok v=N | written <error> [lost-race]   answers the last put-state
//   writes-stopped ok [sessions=N] | writes-stopped <error>
//   shut-down ok|<error> | writes-resumed ok|<error>
//   timer <kind>                      a timer the core set, not cancelled nor fired since
//                                     (its name as set-timer says)
//   later                             the oldest `later` event not yet delivered
//   failsafe-asked primary=a generation=N duration=MS
//   failsafe-released primary=a generation=N promote=id,role,gen[,expires] (a release)
//   failsafe-answer [from=<peer>] granted|refused|<error>   answers the last ask-failsafe (of that peer)
//   rejoined ok|<error> [rewound [discarded=<text>]]   answers the last rejoin
//   upstream-stopped ended|running    answers the last await-upstream-stop
//   sync-sampled ok [streaming=1] [flushed=X/Y] [waiting=N] | sync-sampled <error>
//   members-sampled ok primary=X/Y [<member>=<streaming 0|1>/<X/Y>...] | members-sampled <error>
//                                     answers the last sample-members (a member not named
//                                     has no walsender)
// and the commands that are no input of their own:
//   setup <role> gen=N [v=N] [active=a,b] <state's other peers>
//                         this peer (role: primary, sync, async, deposed) already in that
//                         role of generation N, with postgres running as it (stopped when
//                         deposed): it starts, finds postgres running and set up, joins,
//                         reads the state (version v, 1 by default) with `active` present
//                         (by default every peer the state names), and every operation
//                         the core asks for on the way is answered successfully (a write
//                         lands at the next version and is delivered back as ZooKeeper's
//                         watch would, an apply succeeds, a `later` is delivered). The
//                         file shows where it got to (`= <role> in generation N at state
//                         vM`), not the way, then what the core asked for on the way that
//                         setup does not answer (a deposed peer's rejoin, say), which the
//                         file answers; the test fails if the core got elsewhere.
//   stabilize             every pending `later` event delivered, and those they queue in
//                         turn; nothing else is answered.
//   status                what the core's queries say (core.h: role, the role applied,
//                         whether postgres runs the wanted configuration, writes stopped,
//                         the lease's and the failsafe's ends, the counters...), and
//                         the timers set and neither cancelled nor fired since.
//   last-put              the last put-state's cluster state in full, as written (JSON).
//   stream running=0|1 [from=peer] | stream untold
//                         what postgres' WAL receiver shows in the moments from now on
//                         (Moment::stream; untold, the default: the environment does not say).
// An answer (applied, fenced, wal, written...) answers a command the core gave and no
// answer has been given to yet, or the test fails. Blank lines and lines starting with #
// are kept as they are.
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "driver/core.h"
#include "driver/describe.h"

namespace dugong::driver {
namespace transcript_test {

constexpr EpochMs kWallStart = 1767225600000;

PeerIdentity peer(const std::string& id) {
  PeerIdentity p;
  p.id = id;
  p.ip = "10.0.0." + std::to_string(id.size() > 4 ? std::atoi(id.c_str() + 4) : 0);
  p.pgUrl = "tcp://postgres@" + p.ip + ":5432/postgres";
  p.zoneId = id;
  return p;
}

PeerList peers(const std::string& list) {
  PeerList out;
  std::stringstream in(list);
  std::string id;
  while (std::getline(in, id, ',')) {
    if (!id.empty()) out.push_back(peer(id));
  }
  return out;
}

// key=value words; a bare word is its own key with an empty value.
std::map<std::string, std::string> words(const std::string& text) {
  std::map<std::string, std::string> out;
  std::stringstream in(text);
  std::string w;
  while (in >> w) {
    auto eq = w.find('=');
    out[w.substr(0, eq)] = eq == std::string::npos ? "" : w.substr(eq + 1);
  }
  return out;
}

// promote=id,role,generation[,expires at (transcript ms)]: the promote request's JSON.
nlohmann::json promoteJson(const std::string& text) {
  std::vector<std::string> f;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) f.push_back(part);
  nlohmann::json promote = {{"id", f.at(0)}, {"role", f.at(1)}, {"generation", std::stoll(f.at(2))}};
  if (f.size() > 3) promote["expireTime"] = std::to_string(kWallStart + std::stoll(f[3]));
  return promote;
}

std::string stateData(const std::string& text) {
  auto w = words(text);
  ClusterState s;
  s.generation = std::stoll(w.at("gen"));
  s.primary = peer(w.at("primary"));
  if (w.count("sync")) s.sync = peer(w["sync"]);
  if (w.count("async")) s.async = peers(w["async"]);
  if (w.count("deposed")) s.deposed = peers(w["deposed"]);
  s.initWal = w.count("wal") ? WalPosition::parse(w["wal"]).value() : WalPosition{};
  s.oneNodeWriteMode = w.count("one-node-write") > 0;
  if (w.count("quorum")) {  // quorum=k:m1,m2
    const std::string& q = w["quorum"];
    const auto colon = q.find(':');
    s.quorum = Quorum{std::stoi(q.substr(0, colon)), peers(q.substr(colon + 1))};
  }
  if (w.count("timeline")) s.initTimeline = std::stoll(w["timeline"]);
  if (w.count("promote")) s.promote = promoteJson(w["promote"]);
  if (w.count("standby")) s.standby = StandbyMode{parseSourceUrl(w["standby"]).value(), std::nullopt, nullptr};
  if (w.count("promote-cluster")) {  // promote-cluster=by,gone (0|1),generation,expires at (transcript ms)
    std::vector<std::string> f;
    std::stringstream in(w["promote-cluster"]);
    for (std::string part; std::getline(in, part, ',');) f.push_back(part);
    s.standby->promote = {{"by", f.at(0)},
                          {"sourceGone", f.at(1) == "1"},
                          {"generation", std::stoll(f.at(2))},
                          {"expireTime", std::to_string(kWallStart + std::stoll(f.at(3)))}};
  }
  return s.serialize();
}

// Splits "head rest" at the first space.
std::pair<std::string, std::string> head(const std::string& text) {
  auto sp = text.find(' ');
  if (sp == std::string::npos) return {text, ""};
  return {text.substr(0, sp), text.substr(sp + 1)};
}

class Transcript {
 public:
  explicit Transcript(const std::string& optionsLine) {
    auto w = words(optionsLine.substr(std::string("options").size()));
    DriverOptions o;
    o.identity = peer(w.at("id"));
    auto ms = [&](const char* key, int64_t def) { return w.count(key) ? std::stoll(w[key]) : def; };
    o.failsafe = ms("failsafe", 0) != 0;
    o.failsafeDurationMs = ms("failsafe-ms", 0);
    o.handoverWaitMs = ms("handover-ms", 0);
    o.lease.tickTimeMs = ms("lease-tick-ms", 0);
    o.restartGraceMs = ms("restart-grace-ms", o.restartGraceMs);
    o.syncReplaceAfterMs = ms("sync-replace-ms", 0);
    o.syncSampleMs = ms("sync-sample-ms", o.syncSampleMs);
    o.syncConnectGraceMs = ms("sync-connect-grace-ms", o.syncConnectGraceMs);
    o.withdrawAfterMs = ms("withdraw-ms", o.withdrawAfterMs);
    o.singleton = ms("singleton", 0) != 0;
    o.setupFromData = ms("setup-from-data", 0) != 0;
    o.setupWaitMs = ms("setup-wait-ms", 0);
    o.keepMembershipOnStop = ms("keep-membership", 0) != 0;
    o.stopPostgresOnExit = ms("stop-postgres-on-exit", 0) != 0;
    if (w.count("earlier-promise-ms")) o.earlierPromiseMs = std::stoll(w["earlier-promise-ms"]);
    // The record itself is the runner's (driver.cc): the core only says what to record.
    if (ms("record-promise", 0) != 0) o.recordPromise = [](int64_t) -> Result<bool> { return true; };
    o.rejoin = parseRejoinPolicy(w.count("rejoin") ? w["rejoin"] : "follow").value();
    o.quorum = ms("quorum", 0) != 0;
    self_ = o.identity.id;
    core_ = std::make_unique<Core>(o, ms("peers-reachable", 1) != 0);
  }

  // One input line (after "at <ms> "): the commands, one per line.
  std::string step(int64_t at, const std::string& line) {
    const auto [verb, rest] = head(line);
    if (verb == "setup") return setup(at, rest);
    if (verb == "stabilize") return stabilize(at);
    if (verb == "stream") {  // what postgres' WAL receiver shows from now on: no input
      auto w = words(rest);
      if (rest == "untold") {
        stream_.reset();
      } else {
        stream_ = StreamSample{w["running"] == "1", w["from"]};
      }
      return "";
    }
    if (verb == "status") return status();
    if (verb == "last-put") return "  last put-state: " + lastPut_.state.serialize() + "\n";
    if (const auto it = asked_.find(verb); it != asked_.end()) {  // an answer: to what was asked
      if (it->second == 0) ADD_FAILURE() << "`" << line << "` answers nothing the core asked for";
      it->second = std::max(it->second - 1, 0);
    }
    std::string out;
    for (const Command& c : run(at, parse(line))) out += "  " + describeCommand(c) + "\n";
    return out;
  }

 private:
  std::vector<Command> run(int64_t at, const Input& input) {
    const Moment m{at, kWallStart + at, gone_, stream_};
    std::vector<Command> out = core_->step(m, input);
    for (const Command& c : out) remember(c);
    return out;
  }

  // Every `later` event pending, and those they queue in turn, delivered in order;
  // nothing else is answered.
  std::string stabilize(int64_t at) {
    std::string out;
    while (!laters_.empty()) {
      const Event e = laters_.front();
      laters_.pop_front();
      for (const Command& c : run(at, in::Delivered{e})) out += "  " + describeCommand(c) + "\n";
    }
    return out;
  }

  // What the core's public queries say (core.h): no input.
  std::string status() const {
    const Core& c = *core_;
    auto yes = [](bool b) { return b ? std::string("yes") : std::string("no"); };
    auto ms = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string("none"); };
    std::string out = "  status: role " + std::string(roleName(c.peer().role())) + ", applied " +
                      roleName(c.appliedRole()) + ", runs-wanted-config " + yes(c.runsWantedConfig()) +
                      ", postgres-busy " + yes(c.pgBusy()) + ", apply-queued " + yes(c.applyQueued()) +
                      ", healthy " + yes(c.healthy()) + ", withdrawn " + yes(c.withdrawn()) + ", writes-stopped " +
                      yes(c.writesStopped()) + ", shut-down " + yes(c.postgresShutDown()) + ", connected " +
                      yes(c.coordinatorConnected()) + ", lease " + ms(c.leaseDeadline()) + ", failsafe " +
                      ms(c.failsafeUntil()) + ", promised " + ms(c.promisedUntil());
    if (!c.lastRejoinError().empty()) out += ", rejoin-error " + c.lastRejoinError();
    const DriverCounters& n = c.counters();
    out += "\n  counters: restarts " + std::to_string(n.restarts) + ", joins " + std::to_string(n.joins) +
           ", withdrawals " + std::to_string(n.withdrawals) + ", fresh-state-machines " +
           std::to_string(n.freshStateMachines) + ", write-stops " + std::to_string(n.writeStops) +
           ", write-resumes " + std::to_string(n.writeResumes) + ", shut-downs " + std::to_string(n.shutDowns) +
           ", rejoins " + std::to_string(n.rejoins) + ", rejoin-failures " + std::to_string(n.rejoinFailures) +
           ", handovers " + std::to_string(n.handovers) + ", sync-stalls " + std::to_string(n.syncStalls) + "\n";
    std::string set;
    for (const auto& [key, name] : timers_) set += (set.empty() ? "" : ", ") + name;
    return out + "  timers set: " + (set.empty() ? "none" : set) + "\n";
  }

  // `setup <role> gen=N [v=N] [active=a,b] [primary=a] [sync=b] [async=c,d] [deposed=e]
  // [wal=X/Y]`: this peer starts (postgres found running and set up before) and joins,
  // the cluster state (version v, 1 by default) names it in `role` (primary, sync, async
  // or deposed) with the other peers given, `active` (by default every peer the state
  // names) are present, and every operation the core asks for on the way is answered
  // successfully (a write with the version after the one asked at, then the state
  // written delivered as ZooKeeper would; an apply; a `later` event), until the core is
  // in that role with postgres configured as it (stopped, when deposed). What the core
  // said on the way is not written: the file says where it got to, then what the core
  // asked for that setup does not answer; the test fails if it got elsewhere.
  std::string setup(int64_t at, const std::string& rest) {
    auto [role, args] = head(rest);
    auto w = words(args);
    const int version = w.count("v") ? std::stoi(w["v"]) : 1;
    w.erase("v");
    std::string active = w.count("active") ? w["active"] : "";
    w.erase("active");
    auto add = [&](const std::string& key) { w[key] = w[key].empty() ? self_ : w[key] + "," + self_; };
    if (role == "primary") {
      w["primary"] = self_;
    } else if (role == "sync") {
      if (!w.count("quorum")) w["sync"] = self_;  // in quorum mode, a member: `quorum=` names it
    } else if (role == "async") {
      add("async");
    } else if (role == "deposed") {
      add("deposed");
    } else {
      ADD_FAILURE() << "setup: no such role: " << role;
      return "";
    }
    std::string state;
    for (const auto& [key, value] : w) state += " " + key + (value.empty() ? "" : "=" + value);
    if (active.empty()) {
      for (const char* key : {"primary", "sync", "async", "deposed"}) {
        if (w.count(key)) active += (active.empty() ? "" : ",") + w[key];
      }
      if (w.count("quorum")) active += "," + w["quorum"].substr(w["quorum"].find(':') + 1);
      std::string unique;
      for (const PeerIdentity& p : peers(active)) {
        if (!containsPeer(peers(unique), p.id)) unique += (unique.empty() ? "" : ",") + p.id;
      }
      active = unique;
    }
    std::string pending;  // what the core asked for that setup does not answer: the file does
    --asked_["initialized"];  // answered here: the start below asks for it
    std::deque<Input> todo = {in::Start{}, in::Initialized{PgInitialized{true, true}},
                              parse("zk-init v=" + std::to_string(version) + " active=" + active + " state:" + state)};
    while (!todo.empty()) {
      const Input input = todo.front();
      todo.pop_front();
      for (const Command& c : run(at, input)) {
        if (const auto* a = std::get_if<cmd::ApplyPg>(&c)) {
          --asked_["applied"];
          todo.push_back(in::Applied{a->config, a->fromPeer, PgConfigApplied{true, "", a->config.role != PgRole::kNone}});
        } else if (const auto* p = std::get_if<cmd::PutState>(&c)) {
          --asked_["written"];
          const int32_t next = p->expectedVersion + 1;
          todo.push_back(in::StateWritten{p->purpose, p->expectedVersion, StateWriteFinished{true, "", false, next}});
          todo.push_back(in::Delivered{ClusterStateChanged{StateNode{true, p->state.serialize(), next}}});
        } else if (const auto* l = std::get_if<cmd::Later>(&c)) {
          laters_.pop_back();  // delivered here, not by a `later` of the file
          todo.push_back(in::Delivered{l->event});
        } else if (!std::holds_alternative<cmd::Log>(c) && !std::holds_alternative<cmd::StartHealthCheck>(c) &&
                   !std::holds_alternative<cmd::InitPostgres>(c) && !std::holds_alternative<cmd::Join>(c) &&
                   !std::holds_alternative<cmd::PrimaryApplyStarting>(c) &&
                   !std::holds_alternative<cmd::RoleApplied>(c) && !std::holds_alternative<cmd::SetTimer>(c)) {
          pending += "  " + describeCommand(c) + "\n";
        }
      }
    }
    const std::string reached = roleName(core_->peer().role());
    const std::string applied = roleName(core_->appliedRole());
    if (reached != role || applied != role) {
      ADD_FAILURE() << "setup " << rest << ": the core is " << reached << ", postgres configured as " << applied;
    }
    const auto& now = core_->peer().clusterState();
    return "  = " + reached + " in generation " + std::to_string(now ? now->generation : -1) + " at state v" +
           std::to_string(core_->peer().stateVersion()) + ", postgres " +
           (role == "deposed" ? "stopped" : "running as " + reached) + "\n" + pending;
  }

 private:
  Input parse(const std::string& line) {
    const auto split = head(line);
    const std::string& verb = split.first;
    const std::string& rest = split.second;
    auto w = words(rest);
    auto error = [&] {  // the input's text, less its flags
      std::string e = rest;
      for (const std::string flag : {" lost-race", " offline"}) {
        if (auto at = e.find(flag); at != std::string::npos) e.erase(at, flag.size());
      }
      return e;
    };
    if (verb == "start") return in::Start{};
    if (verb == "stop") return in::Stop{};
    if (verb == "initialized") return in::Initialized{PgInitialized{w["online"] == "1", w["setup"] == "1"}, lastInitAfterRebuild_};
    if (verb == "join-refused") return in::JoinRefused{rest};
    if (verb == "data-state") {
      if (head(rest).first != "ok") return in::DataStateRead{Error{rest}};
      PeerDataState d;
      d.setUp = w["setup"] == "1";
      d.systemId = w["system"];
      d.timeline = w.count("timeline") ? std::stoll(w["timeline"]) : 0;
      if (w.count("wal")) d.wal = WalPosition::parse(w["wal"]).value();
      return in::DataStateRead{d};
    }
    if (verb == "sync-sampled") {
      if (head(rest).first != "ok") return in::SyncSampled{lastSample_.generation, lastSample_.sync, Error{rest}};
      SyncReplicationSample sample;
      sample.streaming = w["streaming"] == "1";
      if (w.count("flushed")) sample.flushed = WalPosition::parse(w["flushed"]).value();
      sample.waitingCommits = w.count("waiting") ? std::stoi(w["waiting"]) : 0;
      return in::SyncSampled{lastSample_.generation, lastSample_.sync, sample};
    }
    if (verb == "members-sampled") {
      if (head(rest).first != "ok") return in::MembersSampled{lastMembers_.generation, lastMembers_.members, Error{rest}};
      QuorumReplicationSample sample;
      sample.primaryFlushed = WalPosition::parse(w.at("primary")).value();
      for (const std::string& id : lastMembers_.members) {
        if (!w.count(id)) continue;
        const auto slash = w[id].find('/');
        sample.members[id] = SyncReplicationSample{w[id].substr(0, slash) == "1",
                                                   WalPosition::parse(w[id].substr(slash + 1)).value(), 0};
      }
      return in::MembersSampled{lastMembers_.generation, lastMembers_.members, sample};
    }
    if (verb == "zk-init") {
      ZkInitialized e;
      auto st = rest.find("state:");
      auto pre = words(rest.substr(0, st));
      e.active = peers(pre["active"]);
      if (st != std::string::npos) e.state = StateNode{true, stateData(rest.substr(st + 6)), std::stoi(pre["v"])};
      return in::Delivered{e};
    }
    if (verb == "state") {
      return in::Delivered{ClusterStateChanged{StateNode{true, stateData(rest), std::stoi(w.at("v"))}}};
    }
    if (verb == "source") {  // source unreachable | source gen=N primary=a [sync=b] (its ensemble read)
      SourceObserved o;
      o.cluster = "standby";
      o.root = "/dugong/standby";
      if (rest == "unreachable") {
        o.seen.lastSeen = "unreachable";
      } else {
        ClusterState src;
        src.generation = std::stoll(w.at("gen"));
        src.primary = peer(w.at("primary"));
        if (w.count("sync")) src.sync = peer(w["sync"]);
        o.seen.reachable = true;
        o.seen.state = ObservedSourceState::of(src);
        o.seen.primaryPresent = true;
      }
      return in::Delivered{o};
    }
    if (verb == "wanted") {  // wanted sync|quorum k=N size=N
      return in::Delivered{ReplicationWanted{head(rest).first == "quorum" ? ReplicationMode::kQuorum : ReplicationMode::kSync,
                                             std::stoi(w.at("k")), std::stoi(w.at("size"))}};
    }
    if (verb == "active") {  // active a,b [data=a:<system>/<timeline>/<wal>,b:empty] [not-streaming=c,d]
      const auto [list, more] = head(rest);
      auto m = words(more);
      ActivePeersChanged e{peers(list)};
      std::stringstream data(m["data"]);
      for (std::string item; std::getline(data, item, ',');) {
        const auto colon = item.find(':');
        PeerDataState d;
        const std::string what = item.substr(colon + 1);
        if (what != "empty") {
          std::stringstream f(what);
          std::string system, timeline, wal;
          std::getline(f, system, '/');
          std::getline(f, timeline, '/');
          std::getline(f, wal);
          d = PeerDataState{true, system, std::stoll(timeline), WalPosition::parse(wal).value(), std::nullopt};
        }
        e.data[item.substr(0, colon)] = d;
      }
      for (const PeerIdentity& p : peers(m["not-streaming"])) e.notStreaming.insert(p.id);
      std::stringstream reports(m["reports"]);  // a:<generation>/<timeline>/<X/Y>@<node version>
      for (std::string item; std::getline(reports, item, ',');) {
        const auto colon = item.find(':');
        const auto at = item.find('@');
        std::stringstream f(item.substr(colon + 1, at - colon - 1));
        std::string generation, timeline, wal;
        std::getline(f, generation, '/');
        std::getline(f, timeline, '/');
        std::getline(f, wal);
        TakeoverReport r;
        r.generation = std::stoll(generation);
        r.history.timeline = std::stoll(timeline);
        r.wal = WalPosition::parse(wal).value();
        r.nodeVersion = std::stoi(item.substr(at + 1));
        e.reports[item.substr(0, colon)] = r;
      }
      return in::Delivered{e};
    }
    if (verb == "connection") {
      return in::Connection{CoordinatorConnection{w.count("back") > 0, w.count("session") ? std::stoll(w["session"]) : 1,
                                                  w.count("timeout") ? std::stoll(w["timeout"]) : 6000}};
    }
    if (verb == "lease") {
      return in::Lease{CoordinatorLease{std::stoll(w.at("sent")), w.count("session") ? std::stoll(w["session"]) : 1,
                                        w.count("timeout") ? std::stoll(w["timeout"]) : 6000,
                                        w.count("interval") ? std::stoll(w["interval"]) : 1000}};
    }
    if (verb == "health") return in::Health{rest == "ok", rest == "ok" ? "" : head(rest).second};
    if (verb == "gone") {
      gone_ = true;
      return in::Health{false, "no postmaster"};
    }
    if (verb == "applied") {
      const bool ok = head(rest).first == "ok";
      return in::Applied{lastApply_.config, lastApply_.fromPeer,
                         PgConfigApplied{ok, ok ? "" : error(), ok && w.count("offline") == 0}};
    }
    if (verb == "fenced") return in::Fenced{PgFenced{rest == "ok", rest == "ok" ? "" : error(), 0}};
    if (verb == "wal") {  // wal <position> | wal error <text>
      if (head(rest).first == "error") return in::WalRead{WalPositionRead{std::nullopt, head(rest).second}};
      WalPositionRead r{WalPosition::parse(head(rest).first).value(), ""};
      if (w.count("timeline")) r.history = TimelineHistory{std::stoll(w["timeline"]), {}};
      return in::WalRead{r};
    }
    if (verb == "published") {  // published ok v=N | published <error>
      const bool ok = head(rest).first == "ok";
      return in::ReportPublished{ReportPublished{ok, ok ? "" : error(), ok ? std::stoi(w.at("v")) : -1}};
    }
    if (verb == "written") {
      const bool ok = head(rest).first == "ok";
      return in::StateWritten{lastPut_.purpose, lastPut_.expectedVersion,
                              StateWriteFinished{ok, ok ? "" : error(), w.count("lost-race") > 0,
                                                 ok ? std::stoi(w.at("v")) : -1}};
    }
    if (verb == "writes-stopped") {
      const bool ok = head(rest).first == "ok";  // ok [sessions=N terminated]
      return in::WritesStopped{ok ? Result<int>(w.count("sessions") ? std::stoi(w["sessions"]) : 0)
                                  : Result<int>(Error{error()})};
    }
    if (verb == "shut-down") return in::ShutDown{rest == "ok" ? Result<bool>(true) : Result<bool>(Error{error()})};
    if (verb == "writes-resumed") {
      return in::WritesResumed{lastResume_, rest == "ok" ? Result<bool>(true) : Result<bool>(Error{error()})};
    }
    if (verb == "timer") {  // a timer set and neither cancelled nor fired since
      for (auto it = timers_.begin(); it != timers_.end(); ++it) {
        if (it->second != rest) continue;
        const TimerKey key = it->first;
        timers_.erase(it);
        return in::Timer{key};
      }
      ADD_FAILURE() << "no timer named " << rest << " is set";
      return in::Timer{};
    }
    if (verb == "later") {
      if (laters_.empty()) ADD_FAILURE() << "no later event is pending";
      Event e = laters_.empty() ? Event{TimerFired{TimerId::kRetryEvaluation}} : laters_.front();
      if (!laters_.empty()) laters_.pop_front();
      return in::Delivered{e};
    }
    if (verb == "failsafe-asked") {
      return in::FailsafeAsked{
          FailsafeRequest{std::stoll(w.at("generation")), w.at("primary"), std::stoll(w.at("duration"))}};
    }
    if (verb == "failsafe-released") {  // primary=.. generation=.. promote=id,role,gen[,expires] (as in a state)
      return in::FailsafeAsked{
          FailsafeRequest::releaseFor(std::stoll(w.at("generation")), w.at("primary"), promoteJson(w.at("promote")).dump())};
    }
    if (verb == "failsafe-answer") {  // [from=<peer>] granted|refused|<error>
      cmd::AskFailsafe ask = lastAsk_;
      std::string answer = rest;
      if (rest.rfind("from=", 0) == 0) {
        const auto [from, tail] = head(rest.substr(5));
        ask = asks_.at(from);
        answer = tail;
      }
      Result<FailsafeAnswer> r = answer == "granted"   ? Result<FailsafeAnswer>(FailsafeAnswer{true, "promised"})
                                 : answer == "refused" ? Result<FailsafeAnswer>(FailsafeAnswer{false, "refused"})
                                                       : Result<FailsafeAnswer>(Error{answer});
      return in::FailsafeAnswered{ask.sentAt, ask.generation, ask.session, r, ask.to.id, ask.request.release};
    }
    if (verb == "rejoined") {  // rejoined ok|<error> [rewound [discarded=<the rest of the line>]]
      const auto rewound = rest.find(" rewound");
      const std::string outcome = rest.substr(0, rewound);
      const auto discarded = rest.find("discarded=");
      return in::Rejoined{lastRejoin_,
                          RejoinFinished{outcome == "ok", rewound != std::string::npos,
                                         discarded == std::string::npos ? "" : rest.substr(discarded + 10),
                                         outcome == "ok" ? "" : outcome}};
    }
    if (verb == "upstream-stopped") return in::UpstreamStopped{lastAwait_, rest == "ended"};
    ADD_FAILURE() << "unknown input: " << line;
    return in::Start{};
  }

  // The input that answers a command, if it has one (by the command's first word).
  static std::string answerTo(const Command& c) {
    static const std::map<std::string, std::string> kAnswers = {
        {"init-postgres", "initialized"}, {"apply", "applied"}, {"fence", "fenced"}, {"read-wal", "wal"},
        {"read-data-state", "data-state"}, {"stop-writes", "writes-stopped"}, {"shut-down-writes", "shut-down"},
        {"resume-writes", "writes-resumed"}, {"await-upstream-stop", "upstream-stopped"}, {"rejoin", "rejoined"},
        {"sample-sync", "sync-sampled"}, {"put-state", "written"}, {"ask-failsafe", "failsafe-answer"},
        {"publish-report", "published"}, {"sample-members", "members-sampled"}};
    const auto it = kAnswers.find(head(describeCommand(c)).first);
    return it == kAnswers.end() ? "" : it->second;
  }

  void remember(const Command& c) {
    if (const std::string verb = answerTo(c); !verb.empty()) ++asked_[verb];
    if (const auto* a = std::get_if<cmd::ApplyPg>(&c)) lastApply_ = *a;
    if (const auto* p = std::get_if<cmd::PutState>(&c)) lastPut_ = *p;
    if (const auto* r = std::get_if<cmd::ResumeWrites>(&c)) lastResume_ = r->noTakeoverCanLand;
    if (const auto* a = std::get_if<cmd::AskFailsafe>(&c)) asks_[a->to.id] = lastAsk_ = *a;
    if (const auto* r = std::get_if<cmd::Rejoin>(&c)) lastRejoin_ = r->primary;
    if (const auto* a = std::get_if<cmd::AwaitUpstreamStop>(&c)) lastAwait_ = a->newSync;
    if (const auto* i = std::get_if<cmd::InitPostgres>(&c)) lastInitAfterRebuild_ = i->afterRebuild;
    if (const auto* p = std::get_if<cmd::SampleSync>(&c)) lastSample_ = *p;
    if (const auto* p = std::get_if<cmd::SampleMembers>(&c)) lastMembers_ = *p;
    if (const auto* l = std::get_if<cmd::Later>(&c)) laters_.push_back(l->event);
    if (const auto* t = std::get_if<cmd::SetTimer>(&c)) timers_[t->key] = describeTimer(t->key);
    if (const auto* t = std::get_if<cmd::CancelTimer>(&c)) timers_.erase(t->key);
  }

  std::unique_ptr<Core> core_;
  std::string self_;
  bool gone_ = false;
  std::optional<StreamSample> stream_;
  cmd::ApplyPg lastApply_;
  cmd::PutState lastPut_;
  bool lastResume_ = false;
  cmd::AskFailsafe lastAsk_;
  std::map<std::string, cmd::AskFailsafe> asks_;  // the last ask of each peer asked
  PeerIdentity lastRejoin_;
  std::optional<PeerIdentity> lastAwait_;
  bool lastInitAfterRebuild_ = false;
  cmd::SampleSync lastSample_;
  cmd::SampleMembers lastMembers_;
  std::deque<Event> laters_;
  std::map<TimerKey, std::string> timers_;
  std::map<std::string, int> asked_;  // per answering input: how many of its commands await one
};

// The file as the core would write it: its input lines, each followed by the commands.
std::string replay(const std::string& path) {
  std::ifstream file(path);
  std::string line, out;
  std::unique_ptr<Transcript> t;
  int number = 0;
  while (std::getline(file, line)) {
    ++number;
    if (line.rfind("  ", 0) == 0) continue;  // the commands: written anew
    SCOPED_TRACE(std::filesystem::path(path).filename().string() + ":" + std::to_string(number) + ": " + line);
    out += line + "\n";
    if (line.rfind("options", 0) == 0) {
      t = std::make_unique<Transcript>(line);
    } else if (line.rfind("at ", 0) == 0) {
      if (!t) {
        ADD_FAILURE() << path << ": an input before the options line";
        return out;
      }
      auto [ms, input] = head(line.substr(3));
      out += t->step(std::stoll(ms), input);
    }
  }
  return out;
}

TEST(Transcript, EveryFileSaysWhatTheCoreDoes) {
  const bool rewrite = std::getenv("DUGONG_REWRITE_TRANSCRIPTS") != nullptr;
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(DUGONG_TRANSCRIPTS)) {
    if (entry.path().extension() != ".txt") continue;
    ++files;
    std::ifstream in(entry.path());
    const std::string expected((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string actual = replay(entry.path().string());
    if (rewrite) {
      std::ofstream(entry.path()) << actual;
    } else {
      EXPECT_EQ(expected, actual) << entry.path().filename()
                                  << " differs (DUGONG_REWRITE_TRANSCRIPTS=1 rewrites it: review the diff)";
    }
  }
  EXPECT_GT(files, 0);
}

// Commands and timers the transcripts above do not produce still say what they are.
TEST(Describe, EveryCommandAndTimerSaysWhatItIs) {
  ClusterState state;
  state.primary = peer("peer1");
  state.sync = peer("peer2");
  state.async = peers("peer3");
  state.deposed = peers("peer4");
  state.oneNodeWriteMode = true;
  PgConfig standby = PgConfig::standby(PgRole::kAsync, peer("peer1"), peer("peer2"));
  const std::vector<std::pair<Command, std::string>> cases = {
      {cmd::InitPostgres{true}, "init-postgres after-rebuild"},
      {cmd::ApplyPg{standby, true}, "apply async upstream=peer1 restore=peer2"},
      {cmd::ReadDataState{}, "read-data-state"},
      {cmd::AwaitUpstreamStop{500, peer("peer2")}, "await-upstream-stop 500ms new-sync=peer2"},
      {cmd::Rejoin{peer("peer1"), RejoinPolicy::kRewind}, "rejoin peer1 rewind"},
      {cmd::SampleSync{3, "peer2"}, "sample-sync peer2 generation=3"},
      {cmd::StopPostgresAndFinish{}, "stop-postgres-and-finish"},
      {cmd::Leave{true}, "leave keeping-membership"},
      {cmd::PutState{state, 7, "why", in::WriteFor::kRelease},
       "put-state release at v7 generation=1 primary=peer1 sync=peer2 async=[peer3] deposed=[peer4] one-node-write: why"},
      {cmd::PublishDataState{std::nullopt}, "publish-data-state none"},
      {cmd::AskFailsafe{peer("peer2"), FailsafeRequest{3, "peer1", 6000}, 2000, 0, 3, 1},
       "ask-failsafe peer2 generation=3 duration=6000ms timeout=2000ms"},
      {cmd::CancelTimer{TimerKey{TimerKind::kStateMachine, TimerId::kRetryPgApply}},
       "cancel-timer state-machine:retry-postgres-apply"},
      {cmd::Log{LogLevel::kDebug, "x"}, "log debug: x"},
      {cmd::Fatal{"why"}, "fatal: why"},
  };
  for (const auto& [c, text] : cases) EXPECT_EQ(describeCommand(c), text);
  for (TimerKind k : {TimerKind::kWithdrawal, TimerKind::kPeerGrace, TimerKind::kRejoin, TimerKind::kHandover,
                      TimerKind::kDataState, TimerKind::kSyncWatch, TimerKind::kStreamWatch, TimerKind::kFailsafe, TimerKind::kHeldTakeover}) {
    EXPECT_NE(std::string(timerKindName(k)), "?");
  }
}

}  // namespace transcript_test
}  // namespace dugong::driver
