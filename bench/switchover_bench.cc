// Planned switchover benchmark: the write-unavailability window of `dugong-adm promote`.
//
//   switchover_bench [--runs N] [--kind sync|async|both]
//
// Starts a 3-peer cluster with the end-to-end harness (real ZooKeeper, postgres and
// agents; session timeout 3 s), then, N times per kind, runs a client that inserts a row
// every 20 ms through the multi-host connection string (target_session_attrs=read-write,
// a new connection per insert, 2 s timeout) and runs `dugong-adm promote` of the sync
// (the sync takes over; the old primary rejoins as an async by itself -- agent key
// `rejoin: follow`, the clean handover -- and the time from the promote until it streams
// again is measured; if it has not within 60 s it is rebuilt with `dugong-adm rebuild -y`
// and counted) or of async[0] (it becomes the sync).
// The window of a run is the longest gap between two consecutive acknowledged inserts
// from 1 s before the promote to 3 s after it returned. Prints each run, then the
// median, min and max per kind. Also checks that every acknowledged row survived.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include "pg/sql.h"
#include "bench/runs_and_kind.h"
#include "bench/write_gap.h"
#include "tests/e2e/cluster_harness.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using dugong::ClusterState;
using dugong::e2e::Harness;
using dugong::bench::median;
using dugong::bench::Writer;

int adm(const std::string& args, std::string* out = nullptr) {
  std::string cmd = std::string(DUGONG_ADM_BINARY) + " " + args + " </dev/null 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return -1;
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  int status = pclose(f);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = dugong::bench::parseRunsAndKind(argc, argv);
  if (!args) {
    std::cerr << "usage: switchover_bench [--runs N] [--kind sync|async|both]\n";
    return 2;
  }
  const int runs = args->runs;
  const std::string kind = args->kind;
  dugong::e2e::HarnessOptions o;
  o.cluster = "bench";
  Harness h(o);
  h.startAll();
  if (h.waitForHealthyCluster(2, 180s) < 0) {
    std::cerr << "cluster did not come up\n" << h.describe();
    return 1;
  }
  const std::string common = "-z " + h.zkConnect() + " -c " + o.cluster;
  auto healthy = [&] { return h.waitFor([&] { return adm(common + " verify") == 0; }, 120s); };
  if (!healthy() || !h.sql(h.writablePrimary(), "CREATE TABLE acked (id int PRIMARY KEY)").ok()) {
    std::cerr << "cluster not healthy\n" << h.describe();
    return 1;
  }

  Writer writer;
  writer.start(h.multiHostConninfo());
  struct StopWriter {
    Writer& w;
    ~StopWriter() { w.finish(); }
  } stopWriter{writer};
  std::map<std::string, std::vector<double>> windows;
  std::vector<double> rejoins;  // promote of the sync: seconds until the old primary streams again
  int rebuilt = 0;
  std::vector<std::string> kinds;
  if (kind == "sync" || kind == "both") kinds.push_back("sync");
  if (kind == "async" || kind == "both") kinds.push_back("async");
  for (const auto& k : kinds) {
    for (int run = 1; run <= runs; ++run) {
      auto s = h.zkState();
      if (!s || !s->sync || s->async.empty()) {
        std::cerr << "unexpected state\n" << h.describe();
        return 1;
      }
      const std::string target = k == "sync" ? s->sync->id : s->async[0].id;
      const std::string oldPrimary = s->primary.id;
      std::this_thread::sleep_for(1s);
      auto before = Clock::now();
      std::string out;
      int rc = adm(common + " promote -i " + target + " -r " + k, &out);
      auto after = Clock::now();
      std::this_thread::sleep_for(3s);
      double gap = writer.longestGapMs(before - 1s, after + 3s);
      if (rc != 0) {
        std::cerr << "promote failed (exit " << rc << "):\n" << out;
        return 1;
      }
      windows[k].push_back(gap);
      std::printf("%-5s run %2d: promote %-6s took %6.0f ms, longest gap between acknowledged inserts %6.0f ms\n",
                  k.c_str(), run, target.c_str(), std::chrono::duration<double, std::milli>(after - before).count(),
                  gap);
      std::fflush(stdout);
      if (k == "sync") {
        // The deposed ex-primary rejoins by itself; rebuilt (and counted) if it does not.
        int idx = h.indexOf(oldPrimary);
        bool back = h.waitFor(
            [&] {
              auto st = h.zkState();
              auto r = h.sql(idx, "SELECT status FROM pg_stat_wal_receiver");
              return st && dugong::containsPeer(st->async, oldPrimary) && r && !r->rows.empty() &&
                     r->rows[0][0] == "streaming";
            },
            60s);
        if (back) {
          rejoins.push_back(std::chrono::duration<double>(Clock::now() - before).count());
          std::printf("      old primary %s streams again as an async %.2f s after the promote began\n",
                      oldPrimary.c_str(), rejoins.back());
        } else {
          ++rebuilt;
          std::printf("      old primary %s did not rejoin by itself within 60 s: rebuilding it\n", oldPrimary.c_str());
          if (adm("rebuild -y --config " + h.peer(idx).configPath, &out) != 0) {
            std::cerr << "rebuild failed:\n" << out;
            return 1;
          }
        }
      }
      if (!healthy()) {
        std::cerr << "cluster not healthy after the run\n" << h.describe();
        return 1;
      }
    }
  }
  writer.finish();

  // No acknowledged row may be missing.
  int primary = h.writablePrimary();
  auto rows = h.sql(primary, "SELECT id FROM acked");
  std::set<int> present;
  if (rows) {
    for (const auto& r : rows->rows) present.insert(std::stoi(r[0].value_or("0")));
  }
  size_t lost = 0;
  for (const auto& [t, id] : writer.acked) lost += present.count(id) == 0;
  std::printf("\nacknowledged inserts: %zu, lost: %zu\n", writer.acked.size(), lost);
  for (const auto& k : kinds) {
    const auto& v = windows[k];
    std::printf("promote %-5s: write-unavailability window median %.0f ms, min %.0f ms, max %.0f ms (%zu runs)\n",
                k == "sync" ? "sync" : "async[0]", median(v), *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()), v.size());
  }
  if (!rejoins.empty()) {
    std::printf("promote sync : old primary streams again (no operator) median %.2f s, min %.2f s, max %.2f s "
                "(%zu runs); rebuilt by the operator: %d\n",
                median(rejoins), *std::min_element(rejoins.begin(), rejoins.end()),
                *std::max_element(rejoins.begin(), rejoins.end()), rejoins.size(), rebuilt);
  }
  return lost == 0 ? 0 : 1;
}
