// The driver core's transcripts (driver/testdata/*.txt): inputs written by hand, each
// followed by the commands the core answers with, indented. The test steps a fresh core
// through each file and compares what it says with what the file says. When behaviour
// changes on purpose, DUGONG_REWRITE_TRANSCRIPTS=1 rewrites the files (review the diff).
//
// A transcript's first line sets the options: `options id=peer1 [key=value...]`
// (failsafe=1, failsafe-ms, handover-ms, lease-tick-ms, rejoin=follow|rewind|manual,
// restart-grace-ms, sync-replace-ms, withdraw-ms, peers-reachable=0). Then, per step,
// `at <monotonic ms> <input>`:
//   start | stop
//   initialized online=0|1 setup=0|1
//   zk-init [v=N] [active=a,b] [state: <state>]   state: gen=N primary=a [sync=b]
//   state v=N <state>                              [async=c,d] [deposed=e] [wal=0/0]
//   active a,b                                     [one-node-write]
//   connection lost|back [timeout=MS] [session=N]
//   lease sent=MS [session=N] [timeout=MS] [interval=MS]
//   health ok | health bad <detail> | gone (the postmaster is gone from now on)
//   applied ok|<error> [offline]      answers the last apply asked for
//   fenced ok|<error>                 answers the last fence
//   wal <position>                    answers read-wal
//   written ok v=N | written <error> [lost-race]   answers the last put-state
//   writes-stopped ok|<error> | shut-down ok|<error> | writes-resumed ok|<error>
//   timer <kind>                      a timer the core set (its name as set-timer says)
//   later                             the oldest `later` event not yet delivered
//   failsafe-asked primary=a generation=N duration=MS
//   failsafe-answer granted|refused|<error>    answers the last ask-failsafe
//   rejoined ok|<error>               answers the last rejoin
//   upstream-stopped ended|running    answers the last await-upstream-stop
// Blank lines and lines starting with # are kept as they are.
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "driver/core.h"
#include "driver/describe.h"

namespace dugong::agent {
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
    o.withdrawAfterMs = ms("withdraw-ms", o.withdrawAfterMs);
    o.rejoin = parseRejoinPolicy(w.count("rejoin") ? w["rejoin"] : "follow").value();
    core_ = std::make_unique<DriverCore>(o, ms("peers-reachable", 1) != 0);
  }

  // One input line (after "at <ms> "): the commands, one per line.
  std::string step(int64_t at, const std::string& line) {
    const Input input = parse(line);
    const Moment m{at, kWallStart + at, gone_};
    std::string out;
    for (const Command& c : core_->step(m, input)) {
      remember(c);
      out += "  " + describeCommand(c) + "\n";
    }
    return out;
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
    if (verb == "initialized") return in::Initialized{PgInitialized{w["online"] == "1", w["setup"] == "1"}};
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
    if (verb == "active") return in::Delivered{ActivePeersChanged{peers(rest)}};
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
    if (verb == "wal") return in::WalRead{WalPositionRead{WalPosition::parse(rest).value(), ""}};
    if (verb == "written") {
      const bool ok = head(rest).first == "ok";
      return in::StateWritten{lastPut_.purpose, lastPut_.expectedVersion,
                              StateWriteFinished{ok, ok ? "" : error(), w.count("lost-race") > 0,
                                                 ok ? std::stoi(w.at("v")) : -1}};
    }
    if (verb == "writes-stopped") {
      return in::WritesStopped{rest == "ok" ? Result<int>(0) : Result<int>(Error{error()})};
    }
    if (verb == "shut-down") return in::ShutDown{rest == "ok" ? Result<bool>(true) : Result<bool>(Error{error()})};
    if (verb == "writes-resumed") {
      return in::WritesResumed{lastResume_, rest == "ok" ? Result<bool>(true) : Result<bool>(Error{error()})};
    }
    if (verb == "timer") {
      for (const auto& [key, name] : timers_) {
        if (name == rest) return in::Timer{key};
      }
      ADD_FAILURE() << "no timer named " << rest << " was set";
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
    if (verb == "failsafe-answer") {
      Result<FailsafeAnswer> r = rest == "granted"   ? Result<FailsafeAnswer>(FailsafeAnswer{true, "promised"})
                                 : rest == "refused" ? Result<FailsafeAnswer>(FailsafeAnswer{false, "refused"})
                                                     : Result<FailsafeAnswer>(Error{error()});
      return in::FailsafeAnswered{lastAsk_.sentAt, lastAsk_.generation, lastAsk_.session, r};
    }
    if (verb == "rejoined") {
      return in::Rejoined{lastRejoin_, RejoinFinished{rest == "ok", false, "", rest == "ok" ? "" : error()}};
    }
    if (verb == "upstream-stopped") return in::UpstreamStopped{lastAwait_, rest == "ended"};
    ADD_FAILURE() << "unknown input: " << line;
    return in::Start{};
  }

  void remember(const Command& c) {
    if (const auto* a = std::get_if<cmd::ApplyPg>(&c)) lastApply_ = *a;
    if (const auto* p = std::get_if<cmd::PutState>(&c)) lastPut_ = *p;
    if (const auto* r = std::get_if<cmd::ResumeWrites>(&c)) lastResume_ = r->noTakeoverCanLand;
    if (const auto* a = std::get_if<cmd::AskFailsafe>(&c)) lastAsk_ = *a;
    if (const auto* r = std::get_if<cmd::Rejoin>(&c)) lastRejoin_ = r->primary;
    if (const auto* a = std::get_if<cmd::AwaitUpstreamStop>(&c)) lastAwait_ = a->newSync;
    if (const auto* l = std::get_if<cmd::Later>(&c)) laters_.push_back(l->event);
    if (const auto* t = std::get_if<cmd::SetTimer>(&c)) timers_[t->key] = describeTimer(t->key);
  }

  std::unique_ptr<DriverCore> core_;
  bool gone_ = false;
  cmd::ApplyPg lastApply_;
  cmd::PutState lastPut_;
  bool lastResume_ = false;
  cmd::AskFailsafe lastAsk_;
  PeerIdentity lastRejoin_;
  std::optional<PeerIdentity> lastAwait_;
  std::deque<Event> laters_;
  std::map<TimerKey, std::string> timers_;
};

// The file as the core would write it: its input lines, each followed by the commands.
std::string replay(const std::string& path) {
  std::ifstream file(path);
  std::string line, out;
  std::unique_ptr<Transcript> t;
  while (std::getline(file, line)) {
    if (line.rfind("  ", 0) == 0) continue;  // the commands: written anew
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
}  // namespace dugong::agent
