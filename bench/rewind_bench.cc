// Rejoin of a kill -9'd ex-primary: a database of DUGONG_BENCH_MB
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
// `history-megabytes` (default 0) are written and streamed before that checkpoint, in
// every run: without them, the source of runs 2.. is young (just made by a base backup)
// and keeps less WAL than one that has been running for a while.
//
//   build/dev/bench/rewind_bench [megabytes] [divergence-megabytes] [runs] [common-megabytes]
//                                [history-megabytes]
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <map>
#include <mutex>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/base_sink.h>
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
void crashDiverged(PgController& ps, PgTestNode& p, const PgTestNode& s, long mb, long commonMb, long historyMb) {
  if (historyMb > 0) {
    mustSql(p, "INSERT INTO lost SELECT g, repeat('h', 1000) FROM generate_series(1, " +
                   std::to_string(historyMb * 1000) + ") g; TRUNCATE lost");
  }
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
  must(ps.apply(PgConfig::firstPrimary(std::nullopt)), "promote the sync alone");
  mustSql(s, "INSERT INTO lost VALUES (0, 'new timeline')");
}

// The size of a node's pg_wal in MB (what pg_rewind copies from it as the source).
double walMegabytes(const PgTestNode& n) {
  return std::atof(n.value("SELECT COALESCE(sum(size), 0) / 1048576.0 FROM pg_ls_waldir()").c_str());
}

// The phases of one rejoin, from the adapter's log: each program it runs ("pg: running
// ..." then "pg: <tool> finished in N ms"), the source's CHECKPOINT and the syncfs after
// pg_rewind. What the log does not name is "other" (connections, pg_controldata's
// neighbours, file writes); the wait from the end of apply() until the upstream sees the
// standby streaming is "stream".
class PhaseSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::map<std::string, double> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(phases_, {});
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string text(msg.payload.data(), msg.payload.size());
    if (text.rfind("pg: running ", 0) == 0) {
      current_ = label(text);
      return;
    }
    std::optional<double> ms;
    std::string phase;
    if (text.rfind("pg: CHECKPOINT on ", 0) == 0) {
      ms = millisAfter(text, {" took ", " after "});
      phase = "source_checkpoint";
    } else if (text.rfind("pg: syncfs of the rewound", 0) == 0) {
      ms = millisAfter(text, {" took "});
      phase = "syncfs";
    } else if (!current_.empty() && text.find(" ms") != std::string::npos) {
      ms = millisAfter(text, {" finished in ", " after "});
      phase = std::exchange(current_, "");
    }
    if (ms) phases_[phase] += *ms / 1000.0;
  }
  void flush_() override {}

 private:
  static std::string label(const std::string& text) {
    auto has = [&](const char* w) { return text.find(w) != std::string::npos; };
    if (has("/postgres --single")) return "crash_recovery";
    if (has("/pg_rewind --dry-run")) return "dry_run";
    if (has("/pg_rewind")) return "pg_rewind";
    if (has("/pg_basebackup")) return "pg_basebackup";
    if (has("/pg_ctl start")) return "start";
    if (has("/pg_ctl stop")) return "stop";
    if (has("/pg_controldata")) return "pg_controldata";
    return "other_programs";
  }
  static std::optional<double> millisAfter(const std::string& text, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      auto at = text.find(key);
      if (at == std::string::npos) continue;
      char* end = nullptr;
      double v = std::strtod(text.c_str() + at + std::strlen(key), &end);
      if (end != text.c_str() + at + std::strlen(key)) return v;
    }
    return std::nullopt;
  }
  std::map<std::string, double> phases_;
  std::string current_;
};

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
  long history = argc > 5 ? std::atol(argv[5]) : 0;
  spdlog::set_level(spdlog::level::info);
  auto phaseSink = std::make_shared<PhaseSink>();
  spdlog::default_logger()->sinks().push_back(phaseSink);
  PgTestCluster cluster("dugong-rewind-bench");
  PgTestNode& a = cluster.addNode("peer-a");
  PgTestNode& b = cluster.addNode("peer-b");
  // dugong's own defaults (wal_keep_size, slots) and postgres' (max_wal_size,
  // min_wal_size, checkpoint_timeout, wal_buffers), not the small ones of the tests,
  // apart from memory.
  for (PgTestNode* n : {&a, &b}) {
    for (const char* k : {"max_wal_size", "min_wal_size", "wal_keep_size", "checkpoint_timeout", "wal_buffers"}) {
      n->options.settings.erase(k);
    }
    n->options.settings["shared_buffers"] = "128MB";
    if (const char* keep = std::getenv("DUGONG_BENCH_WAL_KEEP")) n->options.settings["wal_keep_size"] = keep;
    // DUGONG_BENCH_SET="name=value,name=value": other settings, to measure what they cost.
    if (const char* set = std::getenv("DUGONG_BENCH_SET")) {
      std::string list = set;
      for (size_t at = 0; at < list.size();) {
        size_t end = std::min(list.find(',', at), list.size());
        std::string item = list.substr(at, end - at);
        if (auto eq = item.find('='); eq != std::string::npos) n->options.settings[item.substr(0, eq)] = item.substr(eq + 1);
        at = end + 1;
      }
    }
    n->options.basebackupTimeout = 3600s;
    n->options.rewindTimeout = 3600s;
  }
  dugong::pg::PgOptions noRewind = b.options;
  noRewind.useRewind = false;
  auto pa = std::make_unique<PgController>(a.options);
  auto pb = std::make_unique<PgController>(b.options);
  std::unique_ptr<PgController> pbCopy;

  must(pa->apply(PgConfig::firstPrimary(b.identity)), "primary a");
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
  std::map<std::string, std::map<std::string, std::vector<double>>> phasesOf;  // path -> phase -> seconds
  // Rejoins `standby` (its controller `pc`) as the sync of `upstream`; returns seconds
  // until the upstream sees it streaming, and prints and keeps the phases.
  auto rejoin = [&](const char* path, int run, PgController& pc, PgTestNode& standby, const PgTestNode& upstream) {
    phaseSink->take();
    const auto started = std::chrono::steady_clock::now();
    must(pc.apply(PgConfig::standby(PgRole::kSync, upstream.identity, upstream.identity)), path);
    const double applied = seconds(std::chrono::steady_clock::now() - started);
    waitFor([&] { return streamsFrom(upstream, standby); }, "the rejoined peer to stream");
    const double total = seconds(std::chrono::steady_clock::now() - started);
    std::map<std::string, double> phases = phaseSink->take();
    double named = 0;
    for (const auto& [k, v] : phases) named += v;
    phases["other"] = applied - named;
    phases["stream"] = total - applied;
    std::printf("run %d %s: %.3f s =", run, path, total);
    for (const auto& [k, v] : phases) {
      std::printf(" %s %.3f", k.c_str(), v);
      phasesOf[path][k].push_back(v);
    }
    std::printf("; the source's pg_wal now %.0f MB\n", walMegabytes(upstream));
    std::fflush(stdout);
    return total;
  };
  for (int run = 0; run < runs; ++run) {
    // 1. a (primary) is killed diverged; b takes over; a rejoins (pg_rewind).
    crashDiverged(*pb, a, b, divergence, common, history);
    sourceWal.push_back(walMegabytes(b));
    std::printf("run %d: the source's pg_wal holds %.0f MB (insert position %s: %s)\n", run + 1, sourceWal.back(),
                b.value("SELECT pg_walfile_name(pg_current_wal_lsn())").c_str(),
                b.value("SELECT string_agg(name, ' ' ORDER BY name) FROM pg_ls_waldir()").c_str());
    byRewind.push_back(rejoin("pg_rewind", run + 1, *pa, a, b));
    record("rejoin_killed_by_pg_rewind", byRewind.back());

    // 2. Roles swapped: b is killed diverged; a takes over; b rejoins by pg_basebackup.
    pb = std::make_unique<PgController>(b.options);
    must(pb->apply(PgConfig::firstPrimary(a.identity)), "b with sync a");
    waitWritable(*pb, b);
    crashDiverged(*pa, b, a, divergence, common, history);
    pbCopy = std::make_unique<PgController>(noRewind);
    byCopy.push_back(rejoin("pg_basebackup", run + 1, *pbCopy, b, a));
    record("rejoin_killed_by_pg_basebackup", byCopy.back());

    // Back to the start: a primary with sync b.
    must(pa->apply(PgConfig::firstPrimary(b.identity)), "a with sync b");
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
  for (const auto& [path, phases] : phasesOf) {
    std::printf("SUMMARY phases of the %s path (median / max s):", path.c_str());
    for (const auto& [k, v] : phases) {
      std::printf(" %s %.3f/%.3f", k.c_str(), median(v), *std::max_element(v.begin(), v.end()));
    }
    std::printf("\n");
  }
  if (!byRewind.empty() && !byCopy.empty()) {
    std::printf("SUMMARY ratio of the medians (pg_basebackup / pg_rewind): %.1fx\n", median(byCopy) / median(byRewind));
  }
  std::printf("%s\n", results.dump().c_str());
  return 0;
}
