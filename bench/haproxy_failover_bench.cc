// Unplanned failover as a client behind HAProxy sees it: the sample etc/haproxy.cfg
// (checks every 1 s, 2 failures to mark a server down) in front of a fresh 3-peer
// cluster for each run. T0 is just before SIGKILL of the primary's agent (and of its
// postmaster unless --agent-only); T1 is the first write acknowledged through
// HAProxy's write port by another peer. Also counts connections HAProxy handed to the
// old primary after it was deposed (must be 0).
//
// A run whose cluster does not come up (or whose HAProxy does not start) is not a
// failover: it is reported with the reason and tried again, up to --attempts times,
// so that --runs counts measured failovers. The load average is printed before and
// after (the machine may be shared).
//
//   haproxy_failover_bench [--runs N] [--session-timeout MS] [--agent-only] [--attempts N]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/ecosystem/haproxy_failover.h"

using namespace std::chrono_literals;

namespace {

std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

struct Attempt {
  std::optional<dugong::ecosystem::FailoverThroughHaproxy> failover;  // nullopt: no failover to measure
  std::string error;
};

// One fresh cluster, HAProxy in front, one failover.
Attempt attempt(int sessionTimeoutMs, bool agentOnly) {
  Attempt a;
  try {
    dugong::e2e::HarnessOptions o;
    o.sessionTimeoutMs = sessionTimeoutMs;
    dugong::e2e::Harness h(o);
    h.startAll();
    const int primary = h.waitForHealthyCluster(2, 180s);
    if (primary < 0) {
      a.error = "the cluster did not come up:\n" + h.describe();
      return a;
    }
    dugong::ecosystem::HaproxyProcess haproxy(DUGONG_SOURCE_DIR "/etc/haproxy.cfg",
                                              dugong::ecosystem::haproxyServers(h));
    if (auto ok = haproxy.start(); !ok) {
      a.error = "HAProxy did not start: " + ok.error();
      return a;
    }
    a.failover = dugong::ecosystem::failOverThroughHaproxy(h, primary, haproxy, !agentOnly,
                                                           std::chrono::milliseconds(sessionTimeoutMs * 6 + 60000));
  } catch (const std::exception& e) {
    a.error = std::string("setting up the cluster failed: ") + e.what();
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, sessionTimeoutMs = 2000, attempts = 3;
  bool agentOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::stoi(argv[++i]);
    } else if (a == "--session-timeout" && i + 1 < argc) {
      sessionTimeoutMs = std::stoi(argv[++i]);
    } else if (a == "--attempts" && i + 1 < argc) {
      attempts = std::stoi(argv[++i]);
    } else if (a == "--agent-only") {
      agentOnly = true;
    } else {
      std::fprintf(stderr, "usage: haproxy_failover_bench [--runs N] [--session-timeout MS] [--agent-only] "
                           "[--attempts N]\n");
      return 2;
    }
  }
  std::printf("load average before: %s\n", loadAverage().c_str());
  std::vector<double> times;
  size_t violations = 0;
  int failedFailovers = 0;
  for (int r = 1; r <= runs; ++r) {
    Attempt a;
    for (int k = 1; k <= attempts && !a.failover; ++k) {
      a = attempt(sessionTimeoutMs, agentOnly);
      if (!a.failover) std::printf("run %2d, attempt %d: not measured: %s\n", r, k, a.error.c_str());
    }
    if (!a.failover) {
      std::printf("run %2d: FAILED: no cluster came up in %d attempts\n", r, attempts);
      continue;
    }
    const auto& f = *a.failover;
    if (!f.ok) {
      ++failedFailovers;
      std::printf("run %2d: FAILED: %s\n", r, f.error.c_str());
      continue;
    }
    times.push_back(f.seconds);
    violations += f.violations.size();
    std::printf("run %2d: T1-T0 through HAProxy = %6.2f s, %d writes acknowledged, %zu handed to the deposed peer\n", r,
                f.seconds, f.writes, f.violations.size());
    std::fflush(stdout);
  }
  std::printf("load average after: %s\n", loadAverage().c_str());
  if (times.empty()) return 1;
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  const double median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  std::printf("SUMMARY session timeout %d ms, kill %s: %zu runs, T1-T0 median %.2f s, max %.2f s, min %.2f s; "
              "%zu connections handed to a deposed peer; %d failovers failed\n",
              sessionTimeoutMs, agentOnly ? "agent" : "agent+postmaster", n, median, times.back(), times.front(),
              violations, failedFailovers);
  return violations > 0 || failedFailovers > 0 ? 1 : 0;
}
