// A standby cluster of a plain postgres source at a given size (issue 43, docs/decisions/
// 0083-standby-cluster.md section 9.3): the source filled by `pgbench -i`, then a 3-peer
// standby cluster set up from it (`standby.source: hosts://`); pgbench's TPC-B load on the
// source for --seconds while the standby leader's lag to its source (its /state,
// standby.lag) is sampled every 250 ms; the time until it has caught up after the load;
// then the source stopped (immediate) and `dugong-adm promote-cluster --source-gone`,
// timed from the command to the first acknowledged insert through the cluster's
// multi-host string. Prints each measure. The time for an old site to follow again:
// bench/site_return_bench.
//   standby_cluster_bench [--size-mb 1024] [--seconds 30] [--clients 4]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "pg/command.h"
#include "pg/controller.h"
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
  int seconds = 30;
  int clients = 4;
};

using dugong::bench::secondsSince;
using dugong::bench::runWithPassword;
using dugong::bench::standbyLeader;

std::vector<std::string> pgbenchArgs(const dugong::pg::testing::PgTestNode& source) {
  return {"/usr/bin/pgbench", "-h", "127.0.0.1", "-p", std::to_string(source.port), "-U", "postgres"};
}

nlohmann::json lagOf(Harness& h, int leader) {
  auto st = h.status(leader);
  if (!st || !st->contains("standby") || !(*st)["standby"].is_object()) return nullptr;
  return (*st)["standby"]["lag"];
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
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
      std::cerr << "usage: standby_cluster_bench [--size-mb 1024] [--seconds 30] [--clients 4]\n";
      return 2;
    }
  }
  if (o.sizeMb <= 0 || o.seconds <= 0 || o.clients <= 0) {
    std::cerr << "--size-mb, --seconds and --clients must be positive\n";
    return 2;
  }

  dugong::pg::testing::PgTestCluster sourceCluster("dugong-bench-source");
  dugong::pg::testing::PgTestNode& source = sourceCluster.addNode("source-a");
  dugong::pg::PgController sourcePg(source.options);
  if (auto applied = sourcePg.apply(dugong::PgConfig::firstPrimary(std::nullopt)); !applied.ok) {
    std::cerr << "the source: " << applied.error << "\n";
    return 1;
  }
  if (!dugong::pg::testing::eventually([&] { return sourcePg.pollWritable(); }, 60s)) {
    std::cerr << "the source never became writable\n";
    return 1;
  }
  // pgbench's scale 1 is about 15 MB of tables and indexes.
  const int scale = std::max(1, o.sizeMb / 15);
  auto start = Clock::now();
  std::vector<std::string> init = pgbenchArgs(source);
  init.insert(init.end(), {"-i", "-q", "-s", std::to_string(scale), "postgres"});
  if (auto r = runWithPassword(init, 3600s); !r.ok()) {
    std::cerr << "pgbench -i: " << r.output << "\n";
    return 1;
  }
  std::cout << "source filled: pgbench scale " << scale << ", " << source.value("SELECT pg_size_pretty(pg_database_size('postgres'))")
            << " in " << secondsSince(start) << " s" << std::endl;

  dugong::e2e::HarnessOptions ho;
  ho.cluster = "standbybench";
  ho.extraConfig = "standby:\n  source: hosts://127.0.0.1:" + std::to_string(source.port) + "\n";
  Harness h(ho);
  start = Clock::now();
  h.startAll();
  int leader = -1;
  const bool following = h.waitFor(
      [&] {
        leader = standbyLeader(h);
        if (leader < 0) return false;
        const nlohmann::json lag = lagOf(h, leader);
        return lag.is_object() && lag["walReceiverStatus"] == "streaming";
      },
      3600s);
  if (!following) {
    std::cerr << "no standby leader streams from the source\n" << h.describe();
    return 1;
  }
  std::cout << "standby leader " << h.peer(leader).id << " copied the source and streams from it after "
            << secondsSince(start) << " s" << std::endl;

  // The load, and the lag sampled meanwhile.
  std::vector<std::string> load = pgbenchArgs(source);
  load.insert(load.end(), {"-n", "-c", std::to_string(o.clients), "-j", "1", "-T", std::to_string(o.seconds), "postgres"});
  dugong::pg::CommandResult loaded;
  std::thread bench([&] { loaded = runWithPassword(load, std::chrono::seconds(o.seconds + 120)); });
  std::vector<double> bytes, seconds;
  const auto loadStart = Clock::now();
  while (secondsSince(loadStart) < o.seconds) {
    const nlohmann::json lag = lagOf(h, leader);
    if (lag.is_object() && lag["lagBytes"].is_number()) bytes.push_back(lag["lagBytes"].get<double>());
    if (lag.is_object() && lag["lagSeconds"].is_number()) seconds.push_back(lag["lagSeconds"].get<double>());
    std::this_thread::sleep_for(250ms);
  }
  bench.join();
  std::string tps = "?";
  if (auto at = loaded.output.find("tps = "); at != std::string::npos) tps = loaded.output.substr(at + 6, loaded.output.find(' ', at + 6) - at - 6);
  const auto loadEnd = Clock::now();
  const bool caughtUp = h.waitFor(
      [&] {
        const nlohmann::json lag = lagOf(h, leader);
        return lag.is_object() && lag["lagBytes"] == 0;
      },
      600s);
  char line[300];
  std::snprintf(line, sizeof line,
                "under pgbench (%d clients, %d s, %s tps on the source): the leader's lag over %zu samples: bytes median "
                "%.0f, p99 %.0f, max %.0f; seconds median %.3f, p99 %.3f, max %.3f",
                o.clients, o.seconds, tps.c_str(), bytes.size(), percentile(bytes, 0.5), percentile(bytes, 0.99),
                percentile(bytes, 1.0), percentile(seconds, 0.5), percentile(seconds, 0.99), percentile(seconds, 1.0));
  std::cout << line << std::endl;
  std::cout << (caughtUp ? "caught up " + std::to_string(secondsSince(loadEnd)) + " s after the load ended"
                         : std::string("never caught up"))
            << std::endl;

  // The source gone; promote-cluster.
  source.forceStop();
  if (!h.waitFor([&] { const nlohmann::json lag = lagOf(h, leader); return lag.is_object() && lag["sourceReachable"] == false; },
                 60s)) {
    std::cerr << "the leader still reaches the stopped source\n";
    return 1;
  }
  start = Clock::now();
  dugong::pg::CommandSpec adm;
  adm.argv = {DUGONG_ADM_BINARY, "--zk", h.zkConnect(), "-c", ho.cluster, "promote-cluster", "--source-gone", "--wait", "600"};
  adm.timeout = 700s;
  const dugong::pg::CommandResult promoted = dugong::pg::runCommand(adm);
  const double commandSeconds = secondsSince(start);
  if (!promoted.ok()) {
    std::cerr << "promote-cluster failed: " << promoted.output << "\n";
    return 1;
  }
  const bool writable = h.waitFor(
      [&] { return dugong::pg::runQuery(h.multiHostConninfo(), "CREATE TABLE IF NOT EXISTS after_promotion (id int)", 2s).ok(); },
      600s);
  std::cout << promoted.output;
  std::cout << "promote-cluster --source-gone: the command returned after " << commandSeconds << " s; "
            << (writable ? "the first write acknowledged " + std::to_string(secondsSince(start)) + " s after it began"
                         : std::string("never writable"))
            << std::endl;
  return writable && caughtUp ? 0 : 1;
}
