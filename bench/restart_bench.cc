// Routine operations on the primary, measured as a client sees them:
// - agent-restart: SIGTERM of the primary's agent, then an immediate start (what
//   `systemctl restart dugong` does). Reports the write gap and the generations and
//   cluster-state writes it caused (expected: none).
// - pg-crash: kill -9 of the primary's postmaster under its live agent. Reports the
//   write gap (the agent restarts postgres at once: health interval + crash recovery).
//
//   restart_bench [--runs N] [--kind agent-restart|pg-crash|both]
//
// One 3-peer cluster (end-to-end harness: real ZooKeeper, postgres and agents; session
// timeout 3 s, health interval 1 s). A client inserts a row every 20 ms through the
// multi-host connection string (target_session_attrs=read-write, 2 s timeout), on one
// connection that it opens again after an error. The gap of a run is the longest time between two consecutive
// acknowledged inserts from 1 s before the action until 2 session timeouts after the
// agent is back (agent-restart) or 1 s after writes are acknowledged again (pg-crash).
// Every acknowledged row is checked on the primary at the end.
//
// pg-crash also splits each gap, from the primary's agent and postgres logs: detection
// (kill to the agent's restart), crash recovery (`pg_ctl start`: process start, the
// data directory made durable, redo, end-of-recovery checkpoint, ready), and from
// ready until the sync streams again (commits wait for it). "excess" is the gap minus
// (health interval + crash recovery), for the client and for the server (the kill until
// the sync streams again, when commits can complete).
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/runs_and_kind.h"
#include "bench/write_gap.h"
#include "tests/e2e/cluster_harness.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using dugong::bench::median;
using dugong::bench::Writer;
using dugong::e2e::Harness;

using SysClock = std::chrono::system_clock;

// "2026-11-23T04:37:04.159" (agent log) or "2026-11-23 04:37:08.600" (postgres log), UTC.
std::optional<SysClock::time_point> parseUtc(const std::string& line) {
  static const std::regex stamp(R"((\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)\.(\d{3}))");
  std::smatch m;
  if (!std::regex_search(line, m, stamp) || m.position(0) > 10) return std::nullopt;
  std::tm tm{};
  tm.tm_year = std::stoi(m[1]) - 1900;
  tm.tm_mon = std::stoi(m[2]) - 1;
  tm.tm_mday = std::stoi(m[3]);
  tm.tm_hour = std::stoi(m[4]);
  tm.tm_min = std::stoi(m[5]);
  tm.tm_sec = std::stoi(m[6]);
  return SysClock::from_time_t(timegm(&tm)) + std::chrono::milliseconds(std::stoi(m[7]));
}

// The time of the first line after `from` in `path` containing `needle`.
std::optional<SysClock::time_point> firstAfter(const std::string& path, SysClock::time_point from,
                                               const std::string& needle, std::string* lineOut = nullptr) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) == std::string::npos) continue;
    auto t = parseUtc(line);
    if (t && *t >= from) {
      if (lineOut) *lineOut = line;
      return t;
    }
  }
  return std::nullopt;
}

double msBetween(std::optional<SysClock::time_point> a, std::optional<SysClock::time_point> b) {
  if (!a || !b) return -1;
  return std::chrono::duration<double, std::milli>(*b - *a).count();
}

int healthIntervalMs(const std::string& configPath) {
  std::ifstream in(configPath);
  std::string line;
  while (std::getline(in, line)) {
    auto at = line.find("healthIntervalMs:");
    if (at != std::string::npos) return std::stoi(line.substr(at + 17));
  }
  return 1000;
}

struct Summary {
  std::vector<double> gapsMs;
  std::vector<double> excessMs;        // client's gap - (health interval + crash recovery)
  std::vector<double> serverExcessMs;  // kill to sync streaming - (health interval + crash recovery)
  std::vector<double> generations;
  std::vector<double> stateWrites;
  int failed = 0;
};

void print(const char* kind, const Summary& s) {
  if (s.gapsMs.empty()) {
    std::printf("SUMMARY %s: no successful run (%d failed)\n", kind, s.failed);
    return;
  }
  auto max = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  std::printf("SUMMARY %s: %zu runs (%d failed): write gap median %.0f ms, max %.0f ms; new generations median %.0f, "
              "max %.0f; state writes median %.0f, max %.0f\n",
              kind, s.gapsMs.size(), s.failed, median(s.gapsMs), max(s.gapsMs), median(s.generations),
              max(s.generations), median(s.stateWrites), max(s.stateWrites));
  if (!s.serverExcessMs.empty()) {
    std::printf("SUMMARY %s: kill to sync streaming minus (health interval + crash recovery): median %.0f ms, max "
                "%.0f ms\n",
                kind, median(s.serverExcessMs), max(s.serverExcessMs));
  }
  if (!s.excessMs.empty()) {
    std::printf("SUMMARY %s: client's gap minus (health interval + crash recovery): median %.0f ms, max %.0f ms\n",
                kind, median(s.excessMs), max(s.excessMs));
  }
}

struct E2EPeerPaths {
  std::string agentLog;
  std::string pgLog;
};

}  // namespace

int main(int argc, char** argv) {
  const auto args = dugong::bench::parseRunsAndKind(argc, argv);
  if (!args) {
    std::cerr << "usage: restart_bench [--runs N] [--kind agent-restart|pg-crash|both]\n";
    return 2;
  }
  const int runs = args->runs;
  const std::string kind = args->kind;
  dugong::e2e::HarnessOptions o;
  o.cluster = "bench";
  Harness h(o);
  h.startAll();
  int primary = h.waitForHealthyCluster(2, 180s);
  if (primary < 0 || !h.sql(primary, "CREATE TABLE acked (id int PRIMARY KEY)").ok()) {
    std::cerr << "cluster did not come up\n" << h.describe();
    return 1;
  }
  Writer writer;
  writer.persistent = true;
  writer.start(h.multiHostConninfo());
  const auto sessionTimeout = std::chrono::milliseconds(o.sessionTimeoutMs);
  Summary restarts, crashes;

  auto oneRun = [&](const std::string& what, int run, Summary& into) {
    if (h.waitForHealthyCluster(2, 120s) != primary) {
      std::printf("%s run %2d: FAILED: the cluster is not healthy with the same primary\n", what.c_str(), run);
      ++into.failed;
      return;
    }
    std::this_thread::sleep_for(1s);
    const auto before = h.zkState();
    const size_t historyBefore = h.history().size();
    const auto t0 = Clock::now();
    Clock::time_point until;
    std::optional<SysClock::time_point> killedAt;
    if (what == "agent-restart") {
      h.stopAgent(primary);
      h.startAgent(primary);
      bool back = h.waitFor(
          [&] {
            auto s = h.status(primary);
            return s && (*s)["zookeeper"]["initialized"] == true && (*s)["peer"]["role"] == "primary";
          },
          60s);
      if (!back) {
        std::printf("%s run %2d: FAILED: the agent did not come back\n", what.c_str(), run);
        ++into.failed;
        return;
      }
      until = Clock::now() + 2 * sessionTimeout;
      std::this_thread::sleep_until(until);
    } else {
      const auto killed = h.peer(primary).pg->postmasterPid();
      killedAt = SysClock::now();
      h.killPostgres(primary);
      // An insert in flight at the kill may be acknowledged just after it: wait for
      // the new postmaster, then for an acknowledgement after it was seen.
      std::optional<Clock::time_point> restarted, again;
      h.waitFor(
          [&] {
            if (!restarted) {
              auto pid = h.peer(primary).pg->postmasterPid();
              if (!pid || pid == killed) return false;
              restarted = Clock::now();
            }
            std::lock_guard l(writer.mu);
            if (!writer.acked.empty() && writer.acked.back().first > *restarted) again = writer.acked.back().first;
            return again.has_value();
          },
          60s);
      if (!again) {
        std::printf("%s run %2d: FAILED: no write acknowledged within 60 s\n", what.c_str(), run);
        ++into.failed;
        return;
      }
      until = *again + 1s;
      std::this_thread::sleep_until(until);
    }
    const auto after = h.zkState();
    const double gap = writer.longestGapMs(t0 - 1s, until);
    const double generations = before && after ? static_cast<double>(after->generation - before->generation) : -1;
    const double writes = static_cast<double>(h.history().size() - historyBefore);
    into.gapsMs.push_back(gap);
    into.generations.push_back(generations);
    into.stateWrites.push_back(writes);
    std::printf("%s run %2d: write gap %.0f ms, new generations %.0f, state writes %.0f\n", what.c_str(), run, gap,
                generations, writes);
    if (killedAt) {
      const E2EPeerPaths paths{h.peer(primary).logPath, h.peer(primary).pg->options.logPath()};
      const auto from = *killedAt - std::chrono::milliseconds(50);  // log stamps are in ms
      std::string finished;
      auto restarting = firstAfter(paths.agentLog, from, "restarting postgres as");
      auto started = restarting ? firstAfter(paths.agentLog, *restarting, "pg: pg_ctl finished in ", &finished)
                                : std::nullopt;
      auto ready = firstAfter(paths.pgLog, from, "database system is ready to accept connections");
      auto streams = ready ? firstAfter(paths.pgLog, *ready, "is now a synchronous standby") : std::nullopt;
      const auto in = finished.find("finished in ");
      const double recovery = started && in != std::string::npos ? std::atof(finished.c_str() + in + 12) : -1;
      const int interval = healthIntervalMs(h.peer(primary).configPath);
      // Server side: from the kill until the sync streams again (commits can complete).
      const double serverGap = msBetween(*killedAt, streams);
      if (recovery >= 0) into.excessMs.push_back(gap - (interval + recovery));
      if (recovery >= 0 && serverGap >= 0) into.serverExcessMs.push_back(serverGap - (interval + recovery));
      std::printf("    detection %.0f ms (health interval %d ms), crash recovery (pg_ctl start) %.0f ms, ready to sync "
                  "streaming %.0f ms; kill to sync streaming %.0f ms; excess: client %.0f ms, server %.0f ms\n",
                  msBetween(from, restarting), interval, recovery, msBetween(ready, streams), serverGap,
                  recovery >= 0 ? gap - (interval + recovery) : -1.0,
                  recovery >= 0 && serverGap >= 0 ? serverGap - (interval + recovery) : -1.0);
    }
    std::fflush(stdout);
  };
  if (kind == "agent-restart" || kind == "both") {
    for (int r = 1; r <= runs; ++r) oneRun("agent-restart", r, restarts);
  }
  if (kind == "pg-crash" || kind == "both") {
    for (int r = 1; r <= runs; ++r) oneRun("pg-crash", r, crashes);
  }
  writer.finish();
  if (kind != "pg-crash") print("agent-restart", restarts);
  if (kind != "agent-restart") print("pg-crash", crashes);

  int now = h.writablePrimary();
  std::set<int> present;
  if (now >= 0) {
    auto rows = h.sql(now, "SELECT id FROM acked", 60s);
    if (rows) {
      for (const auto& row : rows->rows) present.insert(std::stoi(row[0].value_or("0")));
    }
  }
  size_t lost = 0;
  for (const auto& [t, id] : writer.acked) lost += present.count(id) ? 0 : 1;
  std::printf("acknowledged rows: %zu, lost: %zu\n", writer.acked.size(), lost);
  return lost == 0 ? 0 : 1;
}
