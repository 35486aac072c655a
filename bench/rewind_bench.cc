// Rejoin of a kill -9'd ex-primary (issue 11 item 3): a database of DUGONG_BENCH_MB
// megabytes (default 1024), a few MB written on the primary that its sync never got,
// SIGKILL of the primary's postmaster, the sync promoted alone; then the ex-primary is
// rejoined as a standby, once by pg_rewind and once (roles swapped) by pg_basebackup.
// The adapter's info log shows each phase's time ("pg_... finished in N ms").
//
// Postgres runs with dugong's own defaults (wal_keep_size 512MB, slots), not with
// settings chosen for the benchmark; DUGONG_BENCH_WAL_KEEP=<size> overrides wal_keep_size
// to measure what it costs. Each run crashes both ways once. The database is checkpointed
// after its load, as a database that has run for a while has been: crash recovery and
// the rewound standby's replay then cover the divergence, not the load. Before each
// rejoin the bench prints the size of the source's pg_wal, which PostgreSQL 15's
// pg_rewind copies in full.
//
// `common-megabytes` (default 0) are written after the last checkpoint and before the
// divergence, streamed to the sync: crash recovery replays them, and the rewound
// standby needs the WAL from that checkpoint on.
//
//   build/dev/bench/rewind_bench [megabytes] [divergence-megabytes] [runs] [common-megabytes]
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "pg/controller.h"
#include "pg/testing/pg_test_cluster.h"
#include "bench/pg_bench_support.h"

using namespace std::chrono_literals;
using dugong::PgConfig;
using dugong::PgRole;
using dugong::pg::PgController;
using dugong::pg::testing::PgTestCluster;
using dugong::pg::testing::PgTestNode;

namespace {

using namespace dugong::bench;  // NOLINT(google-build-using-namespace)

// Primary p (sync s streaming): p checkpoints and writes `commonMb` MB that s receives
// (the WAL since the last checkpoint that both have); s stops, p writes `mb` MB locally
// only, p is killed, s takes over alone and writes on its new timeline.
void crashDiverged(PgController& ps, PgTestNode& p, const PgTestNode& s, long mb, long commonMb) {
  mustSql(p, "CHECKPOINT");
  if (commonMb > 0) {
    mustSql(p, "INSERT INTO lost SELECT g, repeat('c', 1000) FROM generate_series(1, " +
                   std::to_string(commonMb * 1000) + ") g");
    waitFor([&] { return p.value("SELECT count(*) FROM pg_stat_replication WHERE replay_lsn = pg_current_wal_lsn()") ==
                         "1"; },
            "the sync to replay the common WAL");
  }
  must(ps.apply(PgConfig::none()), "stop the sync");
  mustSql(p, "SET synchronous_commit = local; INSERT INTO lost SELECT g, repeat('x', 1000) FROM generate_series(1, " +
                 std::to_string(mb * 1000) + ") g");
  if (!p.signalPostmaster(SIGKILL)) {
    std::fprintf(stderr, "cannot kill %s\n", p.id.c_str());
    std::exit(1);
  }
  must(ps.apply(PgConfig::primary(std::nullopt)), "promote the sync alone");
  mustSql(s, "INSERT INTO lost VALUES (0, 'new timeline')");
}

// The size of a node's pg_wal in MB (what pg_rewind copies from it as the source).
double walMegabytes(const PgTestNode& n) {
  return std::atof(n.value("SELECT COALESCE(sum(size), 0) / 1048576.0 FROM pg_ls_waldir()").c_str());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void summary(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("SUMMARY %s: %zu runs, median %.2f s, max %.2f s, min %.2f s\n", what, v.size(), median(v), v.back(),
              v.front());
}

}  // namespace

int main(int argc, char** argv) {
  long megabytes = argc > 1 ? std::atol(argv[1]) : 1024;
  long divergence = argc > 2 ? std::atol(argv[2]) : 4;
  int runs = argc > 3 ? std::atoi(argv[3]) : 1;
  long common = argc > 4 ? std::atol(argv[4]) : 0;
  spdlog::set_level(spdlog::level::info);
  PgTestCluster cluster("dugong-rewind-bench");
  PgTestNode& a = cluster.addNode("peer-a");
  PgTestNode& b = cluster.addNode("peer-b");
  // dugong's own defaults (wal_keep_size, slots, max_wal_size) apart from memory.
  for (PgTestNode* n : {&a, &b}) {
    n->options.settings["shared_buffers"] = "128MB";
    if (const char* keep = std::getenv("DUGONG_BENCH_WAL_KEEP")) n->options.settings["wal_keep_size"] = keep;
    n->options.basebackupTimeout = 3600s;
    n->options.rewindTimeout = 3600s;
  }
  dugong::pg::PgOptions noRewind = b.options;
  noRewind.useRewind = false;
  auto pa = std::make_unique<PgController>(a.options);
  auto pb = std::make_unique<PgController>(b.options);
  std::unique_ptr<PgController> pbCopy;

  must(pa->apply(PgConfig::primary(b.identity)), "primary a");
  must(pb->apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity)), "sync b");
  waitWritable(*pa, a);
  auto t = std::chrono::steady_clock::now();
  long rows = megabytes * 1024 * 1024 / 1000;  // ~1000 bytes per row on disk
  mustSql(a, "CREATE TABLE lost (id int, pad text); CREATE TABLE big AS SELECT g AS id, repeat(md5(g::text), 28) "
             "AS pad FROM generate_series(1, " + std::to_string(rows) + ") g; CHECKPOINT");
  record("load_database", seconds(std::chrono::steady_clock::now() - t));
  std::string size = a.value("SELECT pg_size_pretty(pg_database_size('postgres'))");
  results["database_size"] = size;
  std::printf("database size: %s, divergence %ld MB, %d runs\n", size.c_str(), divergence, runs);
  waitFor([&] { return a.value("SELECT count(*) FROM pg_stat_replication WHERE replay_lsn = pg_current_wal_lsn()") == "1"; },
          "b to replay everything");

  std::vector<double> byRewind, byCopy, sourceWal;
  for (int run = 0; run < runs; ++run) {
    // 1. a (primary) is killed diverged; b takes over; a rejoins (pg_rewind).
    crashDiverged(*pb, a, b, divergence, common);
    sourceWal.push_back(walMegabytes(b));
    std::printf("run %d: the source's pg_wal holds %.0f MB\n", run + 1, sourceWal.back());
    t = std::chrono::steady_clock::now();
    must(pa->apply(PgConfig::standby(PgRole::kSync, b.identity, b.identity)), "rejoin a by pg_rewind");
    waitFor([&] { return streamsFrom(b, a); }, "a to stream from b");
    byRewind.push_back(seconds(std::chrono::steady_clock::now() - t));
    record("rejoin_killed_by_pg_rewind", byRewind.back());

    // 2. Roles swapped: b is killed diverged; a takes over; b rejoins by pg_basebackup.
    pb = std::make_unique<PgController>(b.options);
    must(pb->apply(PgConfig::primary(a.identity)), "b with sync a");
    waitWritable(*pb, b);
    crashDiverged(*pa, b, a, divergence, common);
    pbCopy = std::make_unique<PgController>(noRewind);
    t = std::chrono::steady_clock::now();
    must(pbCopy->apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity)), "rejoin b by pg_basebackup");
    waitFor([&] { return streamsFrom(a, b); }, "b to stream from a");
    byCopy.push_back(seconds(std::chrono::steady_clock::now() - t));
    record("rejoin_killed_by_pg_basebackup", byCopy.back());

    // Back to the start: a primary with sync b.
    must(pa->apply(PgConfig::primary(b.identity)), "a with sync b");
    pb = std::make_unique<PgController>(b.options);
    must(pb->apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity)), "sync b");
    waitWritable(*pa, a);
    mustSql(a, "TRUNCATE lost");
    waitFor([&] { return a.value("SELECT count(*) FROM pg_stat_replication WHERE replay_lsn = pg_current_wal_lsn()") == "1"; },
            "b to replay everything");
  }
  std::sort(sourceWal.begin(), sourceWal.end());
  if (!sourceWal.empty()) std::printf("SUMMARY source pg_wal before the rewind: median %.0f MB\n", median(sourceWal));
  summary("rejoin_killed_by_pg_rewind", byRewind);
  summary("rejoin_killed_by_pg_basebackup", byCopy);
  std::printf("%s\n", results.dump().c_str());
  return 0;
}
