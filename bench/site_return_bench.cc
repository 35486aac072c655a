// The old site following the new one again at a given size (issue 43, docs/decisions/
// 0083-standby-cluster.md section 9.3, its third measure): site A, a 3-peer dugong
// cluster filled by `pgbench -i`; site B, a 3-peer standby cluster of A's hosts
// (`standby.source: hosts://`), copied from A; A lost (every agent and postgres killed);
// `dugong-adm promote-cluster --source-gone` on B and pgbench's load on B for --seconds
// (A's WAL forks behind that); A started again, writable on its own fork (the wrong
// --source-gone of 0083 7.1, the harder case: one row written there); then `dugong-adm
// demote-cluster --source hosts://<B>` on A, timed to: the command's return; A's leader
// streaming from B; a row written on B read on A's leader; every peer of A holding it.
// Also says how each of A's peers was repaired (pg_rewind or a copy, from their logs):
// the claim is "no copy".
//   site_return_bench [--size-mb 1024] [--seconds 20] [--clients 4]
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "pg/command.h"
#include "pg/sql.h"
#include "pg/testing/pg_test_cluster.h"
#include "bench/standby_bench_support.h"
#include "tests/e2e/cluster_harness.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dugong::e2e::Harness;

struct Options {
  int sizeMb = 1024;
  int seconds = 20;
  int clients = 4;
};

using dugong::bench::secondsSince;
using dugong::bench::runWithPassword;
using dugong::bench::standbyLeader;

dugong::pg::CommandResult adm(const Harness& h, const std::string& cluster, std::vector<std::string> args) {
  std::vector<std::string> argv = {DUGONG_ADM_BINARY, "--zk", h.zkConnect(), "-c", cluster};
  argv.insert(argv.end(), args.begin(), args.end());
  return runWithPassword(argv, 900s);
}

std::vector<std::string> pgbench(Harness& h, int i) {
  return {"/usr/bin/pgbench", "-h", "127.0.0.1", "-p", std::to_string(h.peer(i).pg->port), "-U", "postgres"};
}

std::string hostsOf(Harness& h) {
  std::string out = "hosts://";
  for (int i = 0; i < h.size(); ++i) out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(h.peer(i).pg->port);
  return out;
}

bool holdsRow(Harness& h, int i, int id) {
  auto r = h.sql(i, "SELECT count(*) FROM marks WHERE id = " + std::to_string(id), 2s);
  return r.ok() && !r->rows.empty() && r->rows[0][0] == "1";
}

std::string fileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 < argc && a == "--size-mb") {
      o.sizeMb = std::atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--seconds") {
      o.seconds = std::atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--clients") {
      o.clients = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: site_return_bench [--size-mb 1024] [--seconds 20] [--clients 4]\n";
      return 2;
    }
  }
  if (o.sizeMb <= 0 || o.seconds <= 0 || o.clients <= 0) {
    std::cerr << "--size-mb, --seconds and --clients must be positive\n";
    return 2;
  }

  // Site A, filled.
  dugong::e2e::HarnessOptions ao;
  ao.cluster = "sitea";
  Harness a(ao);
  a.startAll();
  const int ap = a.waitForHealthyCluster(2, 300s);
  if (ap < 0) {
    std::cerr << "site A never became healthy\n" << a.describe();
    return 1;
  }
  const int scale = std::max(1, o.sizeMb / 15);  // pgbench's scale 1: about 15 MB
  auto start = Clock::now();
  std::vector<std::string> init = pgbench(a, ap);
  init.insert(init.end(), {"-i", "-q", "-s", std::to_string(scale), "postgres"});
  if (auto r = runWithPassword(init, 3600s); !r.ok()) {
    std::cerr << "pgbench -i: " << r.output << "\n";
    return 1;
  }
  if (!a.sql(ap, "CREATE TABLE marks (id int PRIMARY KEY); INSERT INTO marks VALUES (1)").ok()) return 1;
  std::cout << "site A filled: pgbench scale " << scale << ", "
            << a.peer(ap).pg->value("SELECT pg_size_pretty(pg_database_size('postgres'))") << " in " << secondsSince(start)
            << " s" << std::endl;

  // Site B, a standby cluster of A.
  dugong::e2e::HarnessOptions bo;
  bo.cluster = "siteb";
  bo.extraConfig = "standby:\n  source: " + hostsOf(a) + "\n";
  Harness b(bo);
  start = Clock::now();
  b.startAll();
  int bl = -1;
  if (!b.waitFor([&] { return (bl = standbyLeader(b)) >= 0 && holdsRow(b, bl, 1); }, 3600s) ||
      !b.waitFor(
          [&] {
            for (int i = 0; i < b.size(); ++i) {
              if (!holdsRow(b, i, 1)) return false;
            }
            return true;
          },
          3600s)) {
    std::cerr << "site B never followed A\n" << b.describe();
    return 1;
  }
  std::cout << "site B (3 peers) copied A and follows it after " << secondsSince(start) << " s" << std::endl;

  // A lost; B promoted, and loaded.
  for (int i = 0; i < a.size(); ++i) {
    a.killAgentAndWatchdog(i);
    a.killPostgres(i);
  }
  // Promoted once B's leader has seen its source gone (its sample is a second old at most).
  if (!b.waitFor(
          [&] {
            auto st = b.status(bl);
            return st && (*st)["standby"].is_object() && (*st)["standby"]["lag"].is_object() &&
                   (*st)["standby"]["lag"]["sourceReachable"] == false;
          },
          60s)) {
    std::cerr << "B's leader still reaches A\n";
    return 1;
  }
  start = Clock::now();
  auto promoted = adm(b, bo.cluster, {"promote-cluster", "--source-gone", "--wait", "600"});
  if (!promoted.ok()) {
    std::cerr << "promote-cluster: " << promoted.output << "\n";
    return 1;
  }
  int bp = -1;
  if (!b.waitFor([&] { return (bp = b.writablePrimary()) >= 0; }, 600s)) return 1;
  std::cout << "promote-cluster --source-gone on B: writable after " << secondsSince(start) << " s" << std::endl;
  std::vector<std::string> load = pgbench(b, bp);
  load.insert(load.end(), {"-n", "-c", std::to_string(o.clients), "-j", "1", "-T", std::to_string(o.seconds), "postgres"});
  const auto loaded = runWithPassword(load, std::chrono::seconds(o.seconds + 120));
  std::string tps = "?";
  if (auto at = loaded.output.find("tps = "); at != std::string::npos) {
    tps = loaded.output.substr(at + 6, loaded.output.find(' ', at + 6) - at - 6);
  }
  const std::string bEnd = b.peer(bp).pg->value("SELECT pg_current_wal_lsn()");
  std::cout << "pgbench on B: " << o.clients << " clients, " << o.seconds << " s, " << tps << " tps; B's WAL at " << bEnd
            << std::endl;

  // A back, writable on its own fork; then demoted toward B.
  for (int i = 0; i < a.size(); ++i) a.startAgent(i);
  const int ap2 = a.waitForHealthyCluster(1, 600s);
  if (ap2 < 0 || !a.sql(ap2, "INSERT INTO marks VALUES (99)").ok()) {
    std::cerr << "site A did not come back writable\n" << a.describe();
    return 1;
  }
  std::vector<size_t> logFrom;
  for (int i = 0; i < a.size(); ++i) logFrom.push_back(fileText(a.peer(i).logPath).size());
  start = Clock::now();
  auto demoted = adm(a, ao.cluster, {"demote-cluster", "--source", hostsOf(b), "--wait", "900"});
  const double commandSeconds = secondsSince(start);
  if (!demoted.ok()) {
    std::cerr << "demote-cluster: " << demoted.output << "\n" << a.logTail(ap2, 80);
    return 1;
  }
  std::cout << "demote-cluster on A: the command returned after " << commandSeconds << " s (A's leader streams from B)"
            << std::endl;
  if (!b.sql(bp, "INSERT INTO marks VALUES (2)").ok()) return 1;
  const bool leaderHas = a.waitFor([&] { return holdsRow(a, ap2, 2); }, 900s);
  std::cout << "a row written on B read on A's leader: " << secondsSince(start) << " s after demote-cluster began"
            << std::endl;
  const bool everyPeer = a.waitFor(
      [&] {
        for (int i = 0; i < a.size(); ++i) {
          if (!holdsRow(a, i, 2) || holdsRow(a, i, 99)) return false;
        }
        return true;
      },
      1800s);
  std::cout << (everyPeer ? "every peer of A holds it (and not A's forked row): " + std::to_string(secondsSince(start)) +
                                " s after demote-cluster began"
                          : std::string("not every peer of A follows B"))
            << std::endl;
  int copies = 0;
  for (int i = 0; i < a.size(); ++i) {
    const std::string log = fileText(a.peer(i).logPath).substr(logFrom[i]);
    const bool copied = log.find("bin/pg_basebackup") != std::string::npos;
    const bool rewound = log.find("pg_rewind") != std::string::npos;
    copies += copied ? 1 : 0;
    std::cout << "  " << a.peer(i).id << (i == ap2 ? " (leader)" : "") << ": "
              << (copied ? "copied (pg_basebackup)" : rewound ? "rewound (pg_rewind)" : "followed as it was") << std::endl;
  }
  std::cout << "copies: " << copies << std::endl;
  return leaderHas && everyPeer ? 0 : 1;
}
