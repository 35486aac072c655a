// Commit latency with one standby's link slowed, sync mode against quorum mode (issue 42,
// docs/decisions/0079-quorum-commit.md section 8). For each mode a fresh 3-peer cluster
// (sync: one sync and one async; quorum: ANY 1 of 2 members), then pgbench inserting rows
// for --seconds, first as it is, then with the WAL stream to one standby limited to
// --rate-kbit (tc htb on lo, a u32 filter on that one connection's ports): in sync mode
// the sync's stream, in quorum mode the first member's. Prints the commits' latency (p50,
// p99, max, from pgbench's per-transaction log) and the rate of each run.
// Needs root (tc) and pgbench (postgresql-15).
//   quorum_latency_bench [--rate-kbit 256] [--seconds 15] [--clients 4]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pg/command.h"
#include "pg/testing/pg_test_cluster.h"
#include "statemachine/cluster_state.h"
#include "tests/e2e/cluster_harness.h"
#include "zk/client.h"

namespace {

using namespace std::chrono_literals;
using dugong::e2e::Harness;

struct Options {
  int rateKbit = 256;
  int seconds = 15;
  int clients = 4;
};

struct Latencies {
  std::vector<double> ms;
  double tps = 0;
  std::string print() const {
    if (ms.empty()) return "no commits";
    std::vector<double> v = ms;
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
    char line[200];
    std::snprintf(line, sizeof line, "%zu commits, %.0f/s, latency p50 %.2f ms, p99 %.2f ms, max %.2f ms", v.size(), tps,
                  at(0.5), at(0.99), v.back());
    return line;
  }
};

bool run(const std::vector<std::string>& argv, std::string* output = nullptr,
         std::map<std::string, std::string> env = {}) {
  dugong::pg::CommandSpec spec;
  spec.argv = argv;
  spec.env = std::move(env);
  spec.timeout = 300s;
  dugong::pg::CommandResult r = dugong::pg::runCommand(spec);
  if (output) *output = r.output;
  if (!r.ok()) std::cerr << "failed (exit " << r.exitCode << "): " << argv[0] << " ...\n" << r.output << "\n";
  return r.ok();
}

// The WAL stream from the primary's port to a standby's client port limited to `kbit` per
// second on lo (an htb class and a u32 filter on the connection's ports; every other
// packet on lo goes through a class of 10 gbit). netem is not in every kernel (not in this
// machine's), htb and u32 are.
class SlowLink {
 public:
  SlowLink(int primaryPort, int clientPort, int kbit) {
    ok_ = run({"/usr/sbin/tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10"}) &&
          run({"/usr/sbin/tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"}) &&
          run({"/usr/sbin/tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate",
               std::to_string(kbit) + "kbit"}) &&
          run({"/usr/sbin/tc", "filter", "add", "dev", "lo", "protocol", "ip", "parent", "1:", "prio", "1", "u32", "match",
               "ip", "sport", std::to_string(primaryPort), "0xffff", "match", "ip", "dport", std::to_string(clientPort),
               "0xffff", "flowid", "1:20"});
  }
  ~SlowLink() { run({"/usr/sbin/tc", "qdisc", "del", "dev", "lo", "root"}); }
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

std::optional<dugong::ClusterState> readState(dugong::zk::Client& zk) {
  auto node = zk.readState();
  if (!node || !node->exists) return std::nullopt;
  auto s = dugong::ClusterState::parse(node->data, dugong::ClusterState::Formats::kSyncAndQuorum);
  return s ? std::optional<dugong::ClusterState>(s.value()) : std::nullopt;
}

Latencies pgbench(Harness& h, int primary, const Options& o, const std::string& dir) {
  Latencies out;
  const std::string script = dir + "/insert.sql";
  std::ofstream(script) << "INSERT INTO bench (v) VALUES (1);\n";
  const std::string prefix = dir + "/pgbench_log";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("pgbench_log", 0) == 0) std::filesystem::remove(e.path());
  }
  const auto& node = *h.peer(primary).pg;
  std::string output;
  if (!run({"/usr/bin/pgbench", "-n", "-h", "127.0.0.1", "-p", std::to_string(node.port), "-U", "postgres", "-c",
            std::to_string(o.clients), "-j", "1", "-T", std::to_string(o.seconds), "-f", script, "--log",
            "--log-prefix=" + prefix, "postgres"},
           &output, {{"PGPASSWORD", dugong::pg::testing::kTestSuperuserPassword}})) {
    return out;
  }
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("tps = ", 0) == 0) out.tps = std::atof(line.c_str() + 6);
  }
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("pgbench_log", 0) != 0) continue;
    std::ifstream log(e.path());
    // client_id transaction_no latency_us script_no epoch us
    long client = 0, tx = 0, us = 0;
    while (log >> client >> tx >> us) {
      out.ms.push_back(static_cast<double>(us) / 1000.0);
      log.ignore(1 << 20, '\n');
    }
  }
  return out;
}

int oneMode(const std::string& mode, const Options& o) {
  dugong::e2e::HarnessOptions ho;
  ho.cluster = "latency" + mode;
  if (mode == "quorum") ho.extraConfig = "replication:\n  mode: quorum\n  k: 1\n  size: 2\n";
  Harness h(ho);
  h.startAll();
  if (h.waitForHealthyCluster(2, 180s) < 0) {
    std::cerr << "no healthy cluster\n" << h.describe();
    return 1;
  }
  auto zk = dugong::zk::Client::connect(h.zkOptions(), 20s);
  if (!zk) {
    std::cerr << zk.error() << "\n";
    return 1;
  }
  std::optional<dugong::ClusterState> s;
  const bool ready = h.waitFor(
      [&] {
        s = readState(*zk.value());
        if (!s) return false;
        if (mode == "sync") return s->sync.has_value();
        return s->quorum && s->quorum->members.size() == 2;
      },
      120s);
  if (!ready) {
    std::cerr << "the state never had the mode's shape\n";
    return 1;
  }
  const int primary = h.indexOf(s->primary.id);
  const std::string slowed = mode == "sync" ? s->sync->id : s->quorum->members[0].id;
  if (!h.sql(primary, "CREATE TABLE bench (id bigserial PRIMARY KEY, v int)").ok()) return 1;
  // Every standby streaming before the first run.
  if (h.waitForHealthyCluster(2, 60s) < 0) return 1;
  const std::string dir = std::filesystem::temp_directory_path() / ("dugong-latency-" + mode);
  std::filesystem::create_directories(dir);
  auto port = h.sql(primary, "SELECT client_port FROM pg_stat_replication WHERE application_name = '" + slowed + "'");
  if (!port || port->rows.size() != 1 || !port->rows[0][0]) {
    std::cerr << slowed << " has no walsender\n";
    return 1;
  }
  // The first run through the same classes with that stream's at 10 gbit: the baseline
  // pays the same qdisc on lo as the slowed run.
  Latencies plain, slow;
  for (int kbit : {10000000, o.rateKbit}) {
    SlowLink link(h.peer(primary).pg->port, std::stoi(*port->rows[0][0]), kbit);
    if (!link.ok()) return 1;
    (kbit == o.rateKbit ? slow : plain) = pgbench(h, primary, o, dir);
  }
  std::cout << mode << " mode, no link slowed: " << plain.print() << std::endl;
  std::cout << mode << " mode, " << slowed << "'s stream limited to " << o.rateKbit << " kbit/s: " << slow.print() << std::endl;
  auto after = readState(*zk.value());
  if (after && after->generation != s->generation) std::cout << "  (a new generation was written meanwhile)\n";
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 < argc && a == "--rate-kbit") {
      o.rateKbit = std::atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--seconds") {
      o.seconds = std::atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--clients") {
      o.clients = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: quorum_latency_bench [--rate-kbit 256] [--seconds 15] [--clients 4]\n";
      return 2;
    }
  }
  if (o.rateKbit <= 0 || o.seconds <= 0 || o.clients <= 0) {
    std::cerr << "--rate-kbit, --seconds and --clients must be positive\n";
    return 2;
  }
  for (const std::string mode : {"sync", "quorum"}) {
    if (int rc = oneMode(mode, o); rc != 0) return rc;
  }
  return 0;
}
