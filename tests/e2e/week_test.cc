// A DBA's week on one 3-peer cluster, as one test (issue 40): features a user combines,
// tested together on the same cluster, in the order a week brings them, under a careful
// writer throughout. Real ZooKeeper, postgres 15 (scram passwords, WAL settings left to
// the defaults as in production) and agents; archiving to a pgBackRest repository in a
// local directory.
//
//  1. max_connections raised cluster-wide (`config set`) and rolled out (`restart --rolling`);
//  2. WAL archiving turned on (`config set backup.archive=on ...`, `restart --pending`);
//  3. three primary kills in a row (kill -9 of its agent and postmaster), each host back
//     (its agent started again): the old primary rejoins by itself;
//  4. a reboot of each peer in turn (agent and postgres stopped, the session left to
//     expire, the agent started);
//  5. max_connections lowered and rolled out (`restart --rolling`) while a report on the
//     async (a read transaction holding a lock) holds its replay back, as long reads on
//     a standby do: the async must not restart before it has replayed the primary's new
//     values (else it keeps the old ones: operator review P15);
//  6. a switchover to the async in one command (`switchover --candidate`);
//  7. a forced re-copy of a standby (`rebuild --full`, its agent stopped).
//
// After each step (and each kill and reboot): the cluster is whole (a writable primary, a
// sync and an async streaming, nobody deposed); every peer runs the cluster's
// max_connections (and archive_mode, once on) with no setting waiting for a restart; the primary archives (pg_stat_archiver:
// archived_count grows after a WAL switch, failed_count does not); no standby's replay is
// paused; `dugong-adm verify` exits 0; no operator rebuild and no copy was needed (the
// history names no rebuild, no agent ran pg_basebackup); every acknowledged row is on the
// primary. Every wait is bounded; nothing asserts on elapsed time. A line per step
// (duration, rows acknowledged) goes to stdout.
//
// About 3 minutes (a plain build; about 13 when checks fail and wait out their bounds):
// ctest label full (scripts/test.sh --full).
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "pg/command.h"
#include "pg/connection.h"
#include "pg/pgbackrest.h"
#include "tests/e2e/careful_writer.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

// The maximum number of connections the week starts with (postgres' default: the
// cluster configuration decides it, no host names it), raises to and lowers to.
constexpr const char* kWeekStartConnections = "100";
constexpr const char* kWeekRaisedConnections = "150";
constexpr const char* kWeekLoweredConnections = "90";

// How many lines of `text` contain both `a` and `b`.
size_t weekCountLines(const std::string& text, const std::string& a, const std::string& b) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(a) != std::string::npos && line.find(b) != std::string::npos;
  return n;
}

// The last `max` lines of `text` that contain one of `needles`, indented.
std::string weekGrep(const std::string& text, const std::vector<std::string>& needles, size_t max = 15) {
  std::vector<std::string> hits;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    for (const auto& n : needles) {
      if (line.find(n) == std::string::npos) continue;
      hits.push_back(line);
      break;
    }
  }
  std::string out;
  for (size_t k = hits.size() > max ? hits.size() - max : 0; k < hits.size(); ++k) out += "    " + hits[k] + "\n";
  return out;
}

class Week : public ::testing::Test {
 protected:
  void TearDown() override {
    if (writer_) writer_->stop();
    if (HasFailure() && h_) std::cerr << h_->describe();
    std::cout << "[week] summary:\n";
    for (const auto& line : summary_) std::cout << "[week]   " << line << "\n";
  }

  // -- the cluster and the tools --------------------------------------------------------

  void startWeek() {
    HarnessOptions o;
    o.cluster = "week";  // the pgBackRest stanza too
    // Decided by the cluster configuration alone, as in production: max_connections
    // (raised and lowered this week) and the WAL settings the test nodes would set small.
    o.clusterWideSettings = {"max_connections", "wal_keep_size", "max_wal_size", "min_wal_size",
                             "checkpoint_timeout", "wal_buffers"};
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    const int primary = h_->waitForHealthyCluster(2, 180s);
    ASSERT_GE(primary, 0) << "the week's cluster did not start: no writable primary with 2 streaming replicas";
    auto made = h_->sql(primary, "CREATE TABLE acked (id int PRIMARY KEY); CREATE TABLE report (id int)");
    ASSERT_TRUE(made.ok()) << made.error();
    writer_ = std::make_unique<CarefulWriter>(h_->multiHostConninfo());
    ASSERT_TRUE(h_->waitFor([&] { return writer_->ackedSince(1) >= 5; }, 60s)) << "the writer gets no acknowledgement";
  }

  std::chrono::milliseconds bound(std::chrono::seconds margin = 120s) const {
    return std::chrono::milliseconds(h_->options().sessionTimeoutMs) + margin;
  }

  pg::CommandResult adm(const std::vector<std::string>& args) {
    pg::CommandSpec spec;
    spec.argv = {DUGONG_ADM_BINARY, "-z", h_->zkConnect(), "-c", h_->options().cluster};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.timeout = 400s;
    return pg::runCommand(spec);
  }
  // "dugong-adm a b c" exited 0; else a failure naming the step, with its output.
  bool admOk(const std::vector<std::string>& args) {
    const pg::CommandResult r = adm(args);
    std::string line = "dugong-adm";
    for (const auto& a : args) line += " " + a;
    if (!r.ok()) {
      ADD_FAILURE() << step_ << ": `" << line << "` failed (exit " << r.exitCode << (r.timedOut ? ", timed out" : "")
                    << "):\n" << r.output;
    } else {
      std::cerr << "[week] " << step_ << ": `" << line << "`:\n" << r.output;
    }
    return r.ok();
  }

  std::string show(int i, const std::string& setting) { return h_->peer(i).pg->value("SHOW " + setting, 5s); }
  bool streams(int i) { return h_->peer(i).pg->value("SELECT status FROM pg_stat_wal_receiver", 3s) == "streaming"; }

  // The peer's agent log: the lines that say what it did about its configuration, its
  // rejoin and its postgres (for failure messages).
  std::string clues(int i) {
    const E2EPeer& p = h_->peer(i);
    return "\n  " + p.id + "'s agent log:\n" +
           weekGrep(dugong::testing::fileText(p.logPath),
                    {"cluster configuration", "clusterConfig", "pending", "restart", "rejoin", "pg_rewind", "deposed",
                     "lower setting", "FATAL", "could not", "refused", "archive_", "archiving", "basebackup"}) +
           "  its postgres log:\n" +
           weekGrep(dugong::testing::fileText(p.pg->options.logPath()), {"FATAL", "PANIC", "ERROR", "paused", "archive"}, 8);
  }

  // Copies of a data directory the agents made (pg_basebackup in their logs).
  size_t agentCopies() {
    size_t n = 0;
    for (int i = 0; i < h_->size(); ++i) n += weekCountLines(dugong::testing::fileText(h_->peer(i).logPath), "pg: running", "pg_basebackup");
    return n;
  }
  // History records of an operator's `dugong-adm rebuild`.
  size_t operatorRebuilds() {
    size_t n = 0;
    for (const auto& e : h_->history()) n += e.data.find("rebuild peer") != std::string::npos;
    return n;
  }

  // pg_stat_archiver on a peer: archived_count, failed_count and the last failure.
  struct Archiver {
    long long archived = -1, failed = -1;
    std::string lastFailed;
  };
  Archiver archiver(int i) {
    Archiver a;
    auto r = h_->sql(i, "SELECT archived_count, failed_count, coalesce(last_failed_wal, '') FROM pg_stat_archiver", 5s);
    if (!r || r->rows.empty()) return a;
    a.archived = std::stoll(r->rows[0][0].value_or("-1"));
    a.failed = std::stoll(r->rows[0][1].value_or("-1"));
    a.lastFailed = r->rows[0][2].value_or("");
    return a;
  }

  // -- the checks after every step ------------------------------------------------------

  // The cluster holds a primary, a sync and an async, all three streaming, nobody
  // deposed. Returns the primary's index (fatal failure if not within the bound).
  int wholeCluster() {
    int primary = -1;
    const bool whole = h_->waitFor(
        [&] {
          auto s = h_->zkState();
          if (!s || s->primary.id.empty() || !s->sync || s->async.size() != 1 || !s->deposed.empty()) return false;
          primary = h_->writablePrimary();
          if (primary < 0 || h_->peer(primary).id != s->primary.id) return false;
          for (int i = 0; i < h_->size(); ++i) {
            if (i != primary && !streams(i)) return false;
          }
          return true;
        },
        bound());
    if (!whole) {
      std::string why;
      for (int i = 0; i < h_->size(); ++i) why += clues(i);
      ADD_FAILURE() << step_ << ": the cluster is not whole (a writable primary, a sync and an async streaming, "
                    << "nobody deposed) within " << bound().count() / 1000 << " s; the state: "
                    << (h_->zkState() ? h_->zkState()->serialize() : "(none)") << why;
      return -1;
    }
    return primary;
  }

  // Every peer runs the cluster's max_connections (and archive_mode = on once archiving
  // is on); waits a bounded time for a restart that is under way.
  void everyPeerRunsTheClusterSettings() {
    std::map<std::string, std::string> wanted = {{"max_connections", maxConnections_}};
    if (archiving_) wanted["archive_mode"] = "on";
    // And nothing waits for a restart: every setting postgres was given is in force.
    const std::string pendingQuery = "SELECT coalesce(string_agg(name, ', '), '') FROM pg_settings WHERE pending_restart";
    for (int i = 0; i < h_->size(); ++i) {
      const bool runs = h_->waitFor(
          [&] {
            for (const auto& [name, value] : wanted) {
              if (show(i, name) != value) return false;
            }
            return h_->peer(i).pg->value(pendingQuery, 5s).empty();
          },
          60s);
      if (runs) continue;
      std::string seen;
      for (const auto& [name, value] : wanted) seen += " " + name + "=" + show(i, name) + " (the cluster's: " + value + ")";
      ADD_FAILURE() << step_ << ": " << h_->peer(i).id << " (" << h_->role(i) << ") does not run the cluster's settings:"
                    << seen << "; waiting for a restart: [" << h_->peer(i).pg->value(pendingQuery) << "]; postgres started at "
                    << h_->peer(i).pg->value("SELECT pg_postmaster_start_time()") << clues(i);
    }
  }

  void noReplayPaused(int primary) {
    for (int i = 0; i < h_->size(); ++i) {
      if (i == primary) continue;
      const std::string query = "SELECT pg_get_wal_replay_pause_state()";
      if (h_->waitFor([&] { return h_->peer(i).pg->value(query, 3s) == "not paused"; }, 30s)) continue;
      ADD_FAILURE() << step_ << ": " << h_->peer(i).id << "'s replay is " << h_->peer(i).pg->value(query)
                    << " (max_connections " << show(i, "max_connections") << ", the primary's "
                    << show(primary, "max_connections") << ")" << clues(i);
    }
  }

  // The primary archives a segment it switches away from, and no archiving fails.
  void archivingWorks(int primary) {
    const Archiver before = archiver(primary);
    auto switched = h_->sql(primary, "SELECT pg_switch_wal()");
    if (!switched) {
      ADD_FAILURE() << step_ << ": pg_switch_wal() on the primary " << h_->peer(primary).id << ": " << switched.error();
      return;
    }
    Archiver now;
    const bool grew = h_->waitFor([&] { return (now = archiver(primary)).archived > before.archived; }, 60s);
    if (!grew || now.failed != before.failed) {
      ADD_FAILURE() << step_ << ": the primary " << h_->peer(primary).id << " does not archive: archived_count "
                    << before.archived << " -> " << now.archived << ", failed_count " << before.failed << " -> "
                    << now.failed << " (last failed: " << now.lastFailed << "), archive_mode " << show(primary, "archive_mode")
                    << ", archive_command " << show(primary, "archive_command") << clues(primary);
    }
  }

  void verifyPasses() {
    pg::CommandResult r;
    if (h_->waitFor([&] { return (r = adm({"verify"})).ok(); }, 120s)) return;
    ADD_FAILURE() << step_ << ": `dugong-adm verify` did not exit 0 within 120 s; its last output (exit " << r.exitCode
                  << "):\n" << r.output;
  }

  // No operator rebuild and no copy since the previous step (a re-copy asked for is
  // counted by the step that asks for it).
  void nothingRebuilt() {
    EXPECT_EQ(operatorRebuilds(), rebuilds_) << step_ << ": the history names an operator's rebuild";
    EXPECT_EQ(agentCopies(), copies_) << step_ << ": an agent copied a data directory (pg_basebackup) rather than "
                                      << "rejoining in place";
    rebuilds_ = operatorRebuilds();
    copies_ = agentCopies();
  }

  void noAcknowledgedRowLost(int primary) {
    const std::set<int> acked = writer_->acked();
    const std::set<int> present = h_->intColumn(primary, "SELECT id FROM acked");
    std::vector<int> lost;
    for (int id : acked) {
      if (!present.count(id)) lost.push_back(id);
    }
    if (lost.empty()) return;
    ADD_FAILURE() << step_ << ": " << lost.size() << " of " << acked.size() << " acknowledged rows are not on the primary "
                  << h_->peer(primary).id << " (first " << lost.front() << ", last " << lost.back() << ")";
  }

  // All the checks; fatal when the cluster is not whole (the next step cannot run).
  void checkTheCluster() {
    const int primary = wholeCluster();
    ASSERT_GE(primary, 0);
    everyPeerRunsTheClusterSettings();
    noReplayPaused(primary);
    if (archiving_) archivingWorks(primary);
    verifyPasses();
    nothingRebuilt();
    noAcknowledgedRowLost(h_->writablePrimary() >= 0 ? h_->writablePrimary() : primary);
  }

  // Runs one step (or part of one), then the checks; prints its line.
  void step(const std::string& name, const std::function<void()>& body) {
    step_ = name;
    SCOPED_TRACE(name);
    const auto start = std::chrono::steady_clock::now();
    const int firstId = writer_->nextId();
    const int failuresBefore = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    body();
    const auto acted = std::chrono::steady_clock::now();
    if (!HasFatalFailure()) checkTheCluster();
    const auto end = std::chrono::steady_clock::now();
    const int parts = ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    auto seconds = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count() / 1000.0; };
    char line[400];
    std::snprintf(line, sizeof line, "%s: %.1f s (%.1f s the step, %.1f s the checks), %zu rows acknowledged of %d, %s",
                  name.c_str(), seconds(end - start), seconds(acted - start), seconds(end - acted),
                  writer_->ackedSince(firstId), writer_->nextId() - firstId,
                  parts == failuresBefore ? "ok" : (std::to_string(parts - failuresBefore) + " failures").c_str());
    summary_.push_back(line);
    std::cout << "[week] " << line << std::endl;
  }

  // -- the steps ------------------------------------------------------------------------

  void rollOut(const std::string& value, const std::vector<std::string>& restart) {
    if (!admOk({"config", "set", "max_connections=" + value})) return;
    maxConnections_ = value;
    admOk(restart);
  }

  // A report on the async: a read transaction holding a lock (ACCESS SHARE on `report`)
  // that the replay of the primary's TRUNCATE of `report` needs, so that the async
  // receives WAL but replays none after it until the report ends or is cancelled
  // (max_standby_streaming_delay, postgres' default 30 s), as on any standby that serves
  // long reads. Returns the report's connection (its end ends the hold).
  std::unique_ptr<pg::Connection> holdTheAsyncReplayBack() {
    const int async = h_->indexWithRole("async");
    const int primary = h_->writablePrimary();
    if (async < 0 || primary < 0) {
      ADD_FAILURE() << step_ << ": no async or no primary for the report";
      return nullptr;
    }
    auto opened = pg::Connection::open(h_->peer(async).pg->conninfo(), std::chrono::steady_clock::now() + 10s);
    if (!opened) {
      ADD_FAILURE() << step_ << ": the report cannot connect to " << h_->peer(async).id << ": " << opened.error();
      return nullptr;
    }
    std::unique_ptr<pg::Connection> report = std::move(opened).value();
    auto locked = report->query("BEGIN; LOCK TABLE report IN ACCESS SHARE MODE; SELECT count(*) FROM report",
                                std::chrono::steady_clock::now() + 10s);
    auto truncated = h_->sql(primary, "TRUNCATE report", 20s);
    const bool held = locked && truncated && h_->waitFor(
        [&] {
          return h_->peer(async).pg->value("SELECT pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn()", 3s) == "t";
        },
        30s);
    if (!held) {
      ADD_FAILURE() << step_ << ": the report on " << h_->peer(async).id << " does not hold its replay back: "
                    << (locked ? "" : locked.error()) << (truncated ? "" : truncated.error());
    }
    return report;
  }

  void turnArchivingOn() {
    // pgBackRest runs as postgres: a repository it owns.
    const passwd* pw = ::getpwnam("postgres");
    ASSERT_NE(pw, nullptr) << "no postgres user";
    repo_ = std::make_unique<dugong::testing::ScratchDir>("dugong-week-repo");
    std::map<std::string, std::string> options;
    for (const std::string what : {"repo1", "log", "lock"}) {
      const std::string dir = repo_->path() + "/" + what;
      std::filesystem::create_directories(dir);
      ASSERT_EQ(::chown(dir.c_str(), pw->pw_uid, pw->pw_gid), 0) << dir;
      options[what + "-path"] = dir;
    }
    std::vector<std::string> set = {"config", "set", "backup.archive=on"};
    for (const auto& [k, v] : options) set.push_back("backup." + k + "=" + v);
    if (!admOk(set)) return;
    archiving_ = true;
    // The stanza (named after the cluster), from the primary, before archive_mode is on.
    const int primary = h_->writablePrimary();
    ASSERT_GE(primary, 0);
    pg::PgOptions host;
    host.dataDir = h_->peer(primary).pg->options.dataDir;
    host.port = h_->peer(primary).pg->options.port;
    const auto created = pg::runPgBackRest(pg::pgBackRestArgv(h_->options().cluster, options, host, "stanza-create"),
                                           host, 300s);
    ASSERT_TRUE(created.ok()) << step_ << ": pgbackrest stanza-create: " << created.output;
    admOk({"restart", "--pending", "--wait", "180"});
  }

  // kill -9 of the primary's agent and postmaster, as the README's failover demo does;
  // another peer takes over; the host is back (its agent started again) and the old
  // primary must stream again as an async by itself.
  void killThePrimary() {
    const int old = h_->writablePrimary();
    ASSERT_GE(old, 0) << step_ << ": no writable primary to kill";
    const std::string id = h_->peer(old).id;
    h_->killAgent(old);
    h_->killPostgres(old);
    ASSERT_TRUE(h_->waitFor(
        [&] {
          const int p = h_->writablePrimary();
          return p >= 0 && p != old;
        },
        bound(60s)))
        << step_ << ": nobody took over from the killed " << id;
    h_->startAgent(old);
    ASSERT_TRUE(h_->waitFor(
        [&] {
          auto s = h_->zkState();
          return s && containsPeer(s->async, id) && !containsPeer(s->deposed, id) && streams(old);
        },
        bound()))
        << step_ << ": the killed primary " << id << " did not stream again as an async by itself (its agent started "
        << "again); the state: " << (h_->zkState() ? h_->zkState()->serialize() : "(none)") << clues(old);
  }

  // A host reboot: its agent stopped (SIGTERM, as systemd does; the session is kept),
  // postgres shut down (fast), the host away until the cluster has let the peer go (its
  // session expired: the primary replaced or the standby dropped from the chain), then
  // its agent started.
  void reboot(int i) {
    const std::string id = h_->peer(i).id;
    const std::string role = h_->role(i);
    h_->stopAgent(i);
    h_->peer(i).pg->signalPostmaster(SIGINT);
    if (!h_->waitFor([&] { return !h_->peer(i).pg->postmasterPid(); }, 60s)) h_->peer(i).pg->forceStop();
    ASSERT_TRUE(h_->waitFor(
        [&] {
          auto s = h_->zkState();
          return s && s->primary.id != id && (!s->sync || s->sync->id != id) && !containsPeer(s->async, id);
        },
        bound(60s)))
        << step_ << ": the cluster did not let " << id << " (" << role << ") go while it was down; the state: "
        << (h_->zkState() ? h_->zkState()->serialize() : "(none)");
    h_->startAgent(i);
  }

  void switchOverToTheAsync() {
    const int async = h_->indexWithRole("async");
    ASSERT_GE(async, 0) << step_ << ": no async";
    const std::string id = h_->peer(async).id;
    if (!admOk({"switchover", "--candidate", id})) return;
    EXPECT_EQ(h_->writablePrimary(), async) << step_ << ": " << id << " is not the writable primary after the switchover";
  }

  // rebuild --full of the async (its agent stopped, as rebuild asks of a peer that is not
  // deposed), then its agent started: a fresh copy (a file only the old directory held
  // is gone), streaming again.
  void recopyAStandby() {
    const int async = h_->indexWithRole("async");
    ASSERT_GE(async, 0) << step_ << ": no async";
    const std::string dataDir = h_->peer(async).pg->options.dataDir;
    h_->stopAgent(async);
    const std::string witness = dataDir + "/dugong-week-witness";
    std::ofstream(witness) << "only in the old data directory\n";
    const bool rebuilt = admOk({"rebuild", "--full", "-y", "--wait", "0", "--config", h_->peer(async).configPath});
    EXPECT_FALSE(rebuilt && std::filesystem::exists(witness)) << step_ << ": " << dataDir << " is not a fresh copy";
    h_->startAgent(async);
    rebuilds_ = operatorRebuilds();  // asked for: not counted against the checks
  }

  std::unique_ptr<Harness> h_;
  std::unique_ptr<CarefulWriter> writer_;
  std::unique_ptr<dugong::testing::ScratchDir> repo_;
  std::string step_ = "start";
  std::string maxConnections_ = kWeekStartConnections;
  bool archiving_ = false;
  size_t rebuilds_ = 0;
  size_t copies_ = 0;
  std::vector<std::string> summary_;
};

TEST_F(Week, SettingsArchivingKillsRebootsSwitchoverAndRecopyOnOneCluster) {
  ASSERT_NO_FATAL_FAILURE(startWeek());
  copies_ = agentCopies();  // the standbys' first copies
  ASSERT_NO_FATAL_FAILURE(step("step 0, the cluster up", [] {}));
  ASSERT_NO_FATAL_FAILURE(step("step 1, max_connections raised and rolled out",
                               [&] { rollOut(kWeekRaisedConnections, {"restart", "--rolling", "--wait", "180"}); }));
  ASSERT_NO_FATAL_FAILURE(step("step 2, WAL archiving on", [&] { turnArchivingOn(); }));
  for (int k = 1; k <= 3; ++k) {
    ASSERT_NO_FATAL_FAILURE(step("step 3, primary kill " + std::to_string(k) + " of 3", [&] { killThePrimary(); }));
  }
  for (int i = 0; i < h_->size(); ++i) {
    const std::string name = "step 4, reboot of " + h_->peer(i).id + " (" + h_->role(i) + ")";
    ASSERT_NO_FATAL_FAILURE(step(name, [&] { reboot(i); }));
  }
  ASSERT_NO_FATAL_FAILURE(step("step 5, max_connections lowered and rolled out while a report holds the async's replay",
                               [&] {
                                 auto report = holdTheAsyncReplayBack();
                                 rollOut(kWeekLoweredConnections, {"restart", "--rolling", "--wait", "180"});
                               }));
  ASSERT_NO_FATAL_FAILURE(step("step 6, switchover to the async in one command", [&] { switchOverToTheAsync(); }));
  ASSERT_NO_FATAL_FAILURE(step("step 7, rebuild --full of the async", [&] { recopyAStandby(); }));

  step_ = "the end";
  writer_->stop();
  const int primary = h_->writablePrimary();
  ASSERT_GE(primary, 0) << "no writable primary at the end of the week";
  noAcknowledgedRowLost(primary);
  char line[200];
  std::snprintf(line, sizeof line, "the week: %zu rows acknowledged of %d attempted, longest time between two "
                "acknowledgements %lld ms", writer_->acked().size(), writer_->nextId() - 1,
                static_cast<long long>(writer_->longestGap().count()));
  summary_.push_back(line);
}

}  // namespace
}  // namespace dugong::e2e
