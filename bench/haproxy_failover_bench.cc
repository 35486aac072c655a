// Unplanned failover as a client behind HAProxy sees it: the sample etc/haproxy.cfg
// (checks every 1 s, 2 failures to mark a server down) in front of a fresh 3-peer
// cluster for each run. T0 is just before SIGKILL of the primary's agent (and of its
// postmaster unless --agent-only); T1 is the first write acknowledged through
// HAProxy's write port by another peer. Also counts connections HAProxy handed to the
// old primary after it was deposed (must be 0).
//
//   haproxy_failover_bench [--runs N] [--session-timeout MS] [--agent-only]
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/ecosystem/haproxy_failover.h"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  int runs = 5, sessionTimeoutMs = 2000;
  bool agentOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::stoi(argv[++i]);
    } else if (a == "--session-timeout" && i + 1 < argc) {
      sessionTimeoutMs = std::stoi(argv[++i]);
    } else if (a == "--agent-only") {
      agentOnly = true;
    } else {
      std::fprintf(stderr, "usage: haproxy_failover_bench [--runs N] [--session-timeout MS] [--agent-only]\n");
      return 2;
    }
  }
  std::vector<double> times;
  size_t violations = 0;
  for (int r = 1; r <= runs; ++r) {
    dugong::e2e::HarnessOptions o;
    o.sessionTimeoutMs = sessionTimeoutMs;
    dugong::e2e::Harness h(o);
    h.startAll();
    const int primary = h.waitForHealthyCluster(2, 180s);
    if (primary < 0) {
      std::printf("run %2d: FAILED: the cluster did not come up\n", r);
      continue;
    }
    dugong::ecosystem::HaproxyProcess haproxy(DUGONG_SOURCE_DIR "/etc/haproxy.cfg",
                                              dugong::ecosystem::haproxyServers(h));
    if (auto ok = haproxy.start(); !ok) {
      std::printf("run %2d: FAILED: %s\n", r, ok.error().c_str());
      continue;
    }
    const auto f = dugong::ecosystem::failOverThroughHaproxy(h, primary, haproxy, !agentOnly,
                                                             std::chrono::milliseconds(sessionTimeoutMs * 6 + 60000));
    if (!f.ok) {
      std::printf("run %2d: FAILED: %s\n", r, f.error.c_str());
      continue;
    }
    times.push_back(f.seconds);
    violations += f.violations.size();
    std::printf("run %2d: T1-T0 through HAProxy = %6.2f s, %d writes acknowledged, %zu handed to the deposed peer\n", r,
                f.seconds, f.writes, f.violations.size());
    std::fflush(stdout);
  }
  if (times.empty()) return 1;
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  const double median = n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  std::printf("SUMMARY session timeout %d ms, kill %s: %zu runs, T1-T0 median %.2f s, max %.2f s, min %.2f s; "
              "%zu connections handed to a deposed peer\n",
              sessionTimeoutMs, agentOnly ? "agent" : "agent+postmaster", n, median, times.back(), times.front(),
              violations);
  return violations > 0 ? 1 : 0;
}
