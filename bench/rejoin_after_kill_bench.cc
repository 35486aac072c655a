// Rejoin of a killed primary through the agents (issue 38): on a 3-peer cluster (real
// ZooKeeper, postgres with scram passwords, agents with the default rejoin: rewind), each
// run commits a row on the primary, kills -9 its agent and its postmaster (as the README's
// failover demo does), waits for the sync to take over and be writable, starts the killed
// peer's agent again and measures the seconds from that start until the peer streams again
// as an async (in the cluster state's async list, out of deposed, pg_stat_wal_receiver
// streaming). The next run kills the new primary. Also counted: rejoins by a copy
// (pg_basebackup runs in the agent's log; should be 0) and by pg_rewind ("pg_rewind
// discarded" in its log). Postgres runs with dugong's WAL defaults (wal_keep_size 0), not the
// test cluster's wal_keep_size 256MB. Before each kill the primary switches to a new WAL
// segment (as a cluster that writes has since its last checkpoint). A rejoin that does not happen within --timeout seconds ends that
// size's series (the failure and the agent's log lines about it are printed).
//
// The series runs on an empty database, and again with --size-mb M on one filled with a
// generated table of about M MB (checkpointed, replicated before the first kill).
// --fresh: a new cluster (and fill) for every run (each kill then is a young cluster's first).
//
//   rejoin_after_kill_bench [--runs N] [--size-mb M] [--session-timeout MS] [--timeout S] [--fresh]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/cluster_harness.h"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dugong::e2e::Harness;
using dugong::e2e::HarnessOptions;

namespace {

struct Options {
  int runs = 10;
  int sizeMb = 0;
  int sessionTimeoutMs = 3000;
  int timeoutSeconds = 600;
  bool fresh = false;
};

std::string readAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t countLines(const std::string& path, const std::string& a, const std::string& b = "") {
  std::istringstream in(readAll(path));
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find(a) != std::string::npos && (b.empty() || line.find(b) != std::string::npos)) ++n;
  }
  return n;
}

std::string clues(const std::string& path) {
  static const std::vector<std::string> keys = {"not rejoined", "pg_rewind:", "could not", "is not set up",
                                                "lower setting than on the primary", "left deposed", "FATAL",
                                                "by pg_basebackup"};
  std::vector<std::string> hits;
  std::istringstream in(readAll(path));
  for (std::string line; std::getline(in, line);) {
    for (const auto& k : keys) {
      if (line.find(k) != std::string::npos) {
        hits.push_back(line);
        break;
      }
    }
  }
  std::string out;
  for (size_t k = hits.size() > 8 ? hits.size() - 8 : 0; k < hits.size(); ++k) out += "    " + hits[k] + "\n";
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

class Series {
 public:
  Series(const Options& o, int sizeMb) : o_(o), sizeMb_(sizeMb) {}

  // Runs the series; false on a failed run (the series ends there).
  bool run() {
    for (int r = 1; r <= o_.runs; ++r) {
      if (!h_ || o_.fresh) {
        if (!setUp()) return false;
      }
      std::string error;
      std::optional<double> s = once(r, error);
      if (!s) {
        std::printf("size %5d MB  run %2d: FAILED: %s\n", sizeMb_, r, error.c_str());
        std::fflush(stdout);
        ++failures_;
        return false;
      }
      times_.push_back(*s);
    }
    return true;
  }

  void summary() const {
    if (times_.empty()) {
      std::printf("SUMMARY size %d MB: no rejoin measured; %d failed, %zu rebuilds by copy\n", sizeMb_, failures_,
                  copies_);
      return;
    }
    std::printf("SUMMARY size %d MB: %zu runs, agent start -> streaming median %.2f s, max %.2f s, min %.2f s; "
                "%zu rebuilds by copy, %zu by pg_rewind, %d failed\n",
                sizeMb_, times_.size(), median(times_), *std::max_element(times_.begin(), times_.end()),
                *std::min_element(times_.begin(), times_.end()), copies_, rewinds_, failures_);
  }
  bool clean() const { return failures_ == 0 && copies_ == 0; }

 private:
  bool setUp() {
    h_.reset();
    HarnessOptions ho;
    ho.cluster = "rejoinbench";
    ho.sessionTimeoutMs = o_.sessionTimeoutMs;
    // dugong's and postgres' own WAL settings (wal_keep_size 0), not the test cluster's.
    ho.clusterWideSettings = {"wal_keep_size", "max_wal_size", "min_wal_size", "checkpoint_timeout", "wal_buffers"};
    h_ = std::make_unique<Harness>(ho);
    h_->startAll();
    primary_ = h_->waitForHealthyCluster(2, 180s);
    if (primary_ < 0) {
      std::printf("size %5d MB: FAILED: the cluster did not come up\n", sizeMb_);
      return false;
    }
    auto created = h_->sql(primary_, "CREATE TABLE marks (id int PRIMARY KEY)");
    if (!created) {
      std::printf("size %5d MB: FAILED: %s\n", sizeMb_, created.error().c_str());
      return false;
    }
    if (sizeMb_ > 0) {
      const auto t = Clock::now();
      const long rows = static_cast<long>(sizeMb_) * 1024 * 1024 / 1000;  // ~1000 bytes a row on disk
      auto filled = h_->sql(primary_,
                            "CREATE TABLE filler AS SELECT g AS id, repeat(md5(g::text), 28) AS pad FROM "
                            "generate_series(1, " + std::to_string(rows) + ") g; CHECKPOINT",
                            3600s);
      if (!filled) {
        std::printf("size %5d MB: FAILED to fill: %s\n", sizeMb_, filled.error().c_str());
        return false;
      }
      const bool caughtUp = h_->waitFor(
          [&] {
            auto r = h_->sql(primary_,
                             "SELECT count(*) FROM pg_stat_replication WHERE replay_lsn = pg_current_wal_lsn()");
            return r && !r->rows.empty() && r->rows[0][0] == "1";  // the sync (the async cascades)
          },
          3600s);
      auto size = h_->sql(primary_, "SELECT pg_size_pretty(pg_database_size('postgres'))");
      std::printf("size %5d MB: database %s, filled and replicated in %.1f s%s\n", sizeMb_,
                  size ? size->rows[0][0].value_or("?").c_str() : "?",
                  std::chrono::duration<double>(Clock::now() - t).count(), caughtUp ? "" : " (sync not caught up)");
      std::fflush(stdout);
    }
    return true;
  }

  bool streams(int i) {
    auto r = h_->sql(i, "SELECT status FROM pg_stat_wal_receiver", 3s);
    return r && !r->rows.empty() && r->rows[0][0] == "streaming";
  }

  std::optional<double> once(int run, std::string& error) {
    Harness& h = *h_;
    const int p = primary_;
    if (!h.sql(p, "SELECT pg_switch_wal()", 10s) || !h.sql(p, "INSERT INTO marks VALUES (" + std::to_string(++mark_) + ")", 10s)) {
      error = "the primary takes no write before the kill";
      return std::nullopt;
    }
    const int sync = h.indexWithRole("sync");
    if (sync < 0) {
      error = "no sync in the cluster state";
      return std::nullopt;
    }
    const std::string S = h.peer(sync).id, P = h.peer(p).id;
    const std::string log = h.peer(p).logPath;
    const size_t copiesBefore = countLines(log, "pg: running", "pg_basebackup");
    const size_t rewindsBefore = countLines(log, "rejoin: pg_rewind discarded");
    const auto bound = std::chrono::milliseconds(o_.sessionTimeoutMs) + std::chrono::seconds(o_.timeoutSeconds);

    h.killAgent(p);
    h.killPostgres(p);
    if (!h.waitFor([&] { auto s = h.zkState(); return s && s->primary.id == S && h.writablePrimary() == sync; },
                   bound)) {
      error = S + " did not take over from " + P;
      return std::nullopt;
    }
    const auto t0 = Clock::now();
    h.startAgent(p);
    const bool back = h.waitFor(
        [&] {
          auto s = h.zkState();
          return s && s->primary.id == S && dugong::containsPeer(s->async, P) && !dugong::containsPeer(s->deposed, P) &&
                 streams(p);
        },
        bound);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const size_t copies = countLines(log, "pg: running", "pg_basebackup") - copiesBefore;
    const size_t rewinds = countLines(log, "rejoin: pg_rewind discarded") - rewindsBefore;
    copies_ += copies;
    rewinds_ += rewinds;
    if (!back) {
      error = P + " did not stream again within " + std::to_string(bound.count() / 1000) +
              " s of its agent's start; its log:\n" + clues(log);
      return std::nullopt;
    }
    std::printf("size %5d MB  run %2d: %s streams again %6.2f s after its agent's start (%s, %zu copies)\n", sizeMb_,
                run, P.c_str(), seconds, rewinds ? "rewound" : "followed as it was", copies);
    std::fflush(stdout);
    // The whole cluster again before the next kill (the new primary's sync streams).
    if (h.waitForHealthyCluster(2, 120s) != sync) {
      error = "the cluster is not whole after the rejoin";
      return std::nullopt;
    }
    primary_ = sync;
    return seconds;
  }

  const Options& o_;
  int sizeMb_;
  std::unique_ptr<Harness> h_;
  int primary_ = -1;
  int mark_ = 0;
  std::vector<double> times_;
  size_t copies_ = 0;
  size_t rewinds_ = 0;
  int failures_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      o.runs = std::stoi(argv[++i]);
    } else if (a == "--size-mb" && i + 1 < argc) {
      o.sizeMb = std::stoi(argv[++i]);
    } else if (a == "--session-timeout" && i + 1 < argc) {
      o.sessionTimeoutMs = std::stoi(argv[++i]);
    } else if (a == "--timeout" && i + 1 < argc) {
      o.timeoutSeconds = std::stoi(argv[++i]);
    } else if (a == "--fresh") {
      o.fresh = true;
    } else {
      std::fprintf(stderr,
                   "usage: rejoin_after_kill_bench [--runs N] [--size-mb M] [--session-timeout MS] [--timeout S] "
                   "[--fresh]\n");
      return 2;
    }
  }
  std::vector<int> sizes = {0};
  if (o.sizeMb > 0) sizes.push_back(o.sizeMb);
  bool clean = true;
  for (int size : sizes) {
    Series s(o, size);  // its cluster is stopped at the end of the iteration
    s.run();
    s.summary();
    std::fflush(stdout);
    clean = clean && s.clean();
  }
  return clean ? 0 : 1;
}
