// The agent at rest: resident memory and CPU of each agent of a healthy 3-peer cluster
// (real ZooKeeper and postgres), and what the memory is made of.
//
// For each agent, after the cluster has been healthy for --settle seconds: VmRSS and
// its parts (anonymous, file-backed), the heap, the number of threads, and the CPU
// used over --seconds (every thread's /proc/<pid>/task/*/schedstat), as % of one core;
// the same CPU figure for its watchdog process.
//
//   agent_rest_bench [--session-timeout 2000] [--health-interval-ms 1000] [--settle 10]
//                    [--seconds 60] [--maps] [--log-level info] [--tls]
// --health-interval-ms replaces the test harness's 300 ms (postgres.healthIntervalMs;
// the agent's default is 1000). --log-level replaces the harness's debug (the agent's
// default is info). --maps also prints, for each agent, the resident size
// of each mapped file (all its segments) and of the anonymous mappings. --tls runs the
// cluster TLS only (the e2e harness' tlsOnly: hostssl pg_hba, sslmode verify-full). The agents inherit the environment (e.g. MALLOC_ARENA_MAX).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_harness.h"

using namespace std::chrono_literals;

namespace {

// "Key:   123 kB" lines of a /proc file, in kB.
std::map<std::string, long> kbFields(const std::string& path) {
  std::map<std::string, long> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream v(line.substr(colon + 1));
    long kb = 0;
    if (v >> kb) out[line.substr(0, colon)] = kb;
  }
  return out;
}

// CPU time of every thread of `pid` so far, in ns (the first field of each thread's
// schedstat: exact, where /proc/<pid>/stat counts 10 ms ticks).
long long cpuNanos(pid_t pid) {
  long long total = 0;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& t : std::filesystem::directory_iterator(tasks)) {
    std::ifstream in(t.path() / "schedstat");
    long long ns = 0;
    if (in >> ns) total += ns;
  }
  return total;
}

// The files (and [anonymous], [heap], [stack]...) with the most resident memory, all
// their mappings together: kB, name.
std::vector<std::pair<long, std::string>> largestMappings(pid_t pid, size_t n) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  std::map<std::string, long> byName;
  std::string current;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < 17) {
      std::istringstream f(line);
      std::string range, perms, offset, dev, inode, name;
      f >> range >> perms >> offset >> dev >> inode;
      std::getline(f, name);
      name.erase(0, name.find_first_not_of(' '));
      current = name.empty() ? "[anonymous]" : name;
    } else if (line.rfind("Rss:", 0) == 0) {
      byName[current] += std::stol(line.substr(4));
    }
  }
  std::vector<std::pair<long, std::string>> out;
  for (auto& [name, kb] : byName) out.push_back({kb, name});
  std::sort(out.rbegin(), out.rend());
  if (out.size() > n) out.resize(n);
  return out;
}

// The agent's watchdog: its child named dugong-watchdog; -1 if none.
pid_t watchdogOf(pid_t agent) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string pid, comm, state, ppid;
    if (stat >> pid >> comm >> state >> ppid && comm == "(dugong-watchdog)" && ppid == std::to_string(agent)) {
      return static_cast<pid_t>(std::stol(pid));
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  int sessionTimeoutMs = 2000, healthIntervalMs = 1000, settle = 10, seconds = 60;
  bool maps = false, tls = false;
  std::string logLevel = "debug";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--session-timeout" && i + 1 < argc) {
      sessionTimeoutMs = std::stoi(argv[++i]);
    } else if (a == "--health-interval-ms" && i + 1 < argc) {
      healthIntervalMs = std::stoi(argv[++i]);
    } else if (a == "--settle" && i + 1 < argc) {
      settle = std::stoi(argv[++i]);
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::stoi(argv[++i]);
    } else if (a == "--log-level" && i + 1 < argc) {
      logLevel = argv[++i];
    } else if (a == "--maps") {
      maps = true;
    } else if (a == "--tls") {
      tls = true;
    } else {
      std::fprintf(stderr, "usage: agent_rest_bench [--session-timeout MS] [--health-interval-ms MS] [--settle S] "
                   "[--seconds S] [--maps] [--log-level L] [--tls]\n");
      return 2;
    }
  }
  dugong::e2e::HarnessOptions o;
  o.sessionTimeoutMs = sessionTimeoutMs;
  o.tlsOnly = tls;
  dugong::e2e::Harness h(o);
  for (int i = 0; i < h.size(); ++i) {
    std::ifstream in(h.peer(i).configPath);
    std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string from = "healthIntervalMs: 300";
    const auto at = config.find(from);
    if (at == std::string::npos) {
      std::fprintf(stderr, "the harness no longer writes \"%s\"\n", from.c_str());
      return 1;
    }
    config.replace(at, from.size(), "healthIntervalMs: " + std::to_string(healthIntervalMs));
    const std::string level = "level: debug";
    const auto levelAt = config.find(level);
    if (levelAt == std::string::npos) {
      std::fprintf(stderr, "the harness no longer writes \"%s\"\n", level.c_str());
      return 1;
    }
    config.replace(levelAt, level.size(), "level: " + logLevel);
    std::ofstream(h.peer(i).configPath) << config;
  }
  h.startAll();
  if (h.waitForHealthyCluster(2, 180s) < 0) {
    std::fprintf(stderr, "the cluster did not come up\n%s", h.describe().c_str());
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(settle));
  std::vector<long long> before, watchdogBefore;
  std::vector<pid_t> watchdogs;
  for (int i = 0; i < h.size(); ++i) {
    before.push_back(cpuNanos(h.peer(i).agentPid));
    watchdogs.push_back(watchdogOf(h.peer(i).agentPid));
    watchdogBefore.push_back(watchdogs.back() > 0 ? cpuNanos(watchdogs.back()) : 0);
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  std::printf("session timeout %d ms, postgres.healthIntervalMs %d, log level %s, CPU measured over %d s\n",
              sessionTimeoutMs, healthIntervalMs, logLevel.c_str(), seconds);
  for (int i = 0; i < h.size(); ++i) {
    const pid_t pid = h.peer(i).agentPid;
    const std::string proc = "/proc/" + std::to_string(pid);
    auto status = kbFields(proc + "/status");
    auto rollup = kbFields(proc + "/smaps_rollup");
    const double cpu = 100.0 * static_cast<double>(cpuNanos(pid) - before[static_cast<size_t>(i)]) / 1e9 / seconds;
    std::printf("%-6s %-8s RSS %6ld kB (anonymous %5ld, file %5ld), threads %ld, "
                "CPU %.3f %% of a core over %d s\n",
                h.peer(i).id.c_str(), h.role(i).c_str(), status["VmRSS"], status["RssAnon"], status["RssFile"],
                status["Threads"], cpu, seconds);
    std::printf("       Pss %ld kB, Private_Dirty %ld kB, Shared_Clean %ld kB\n", rollup["Pss"], rollup["Private_Dirty"],
                rollup["Shared_Clean"]);
    const pid_t watchdog = watchdogs[static_cast<size_t>(i)];
    if (watchdog > 0) {
      const double w =
          100.0 * static_cast<double>(cpuNanos(watchdog) - watchdogBefore[static_cast<size_t>(i)]) / 1e9 / seconds;
      std::printf("       its watchdog (pid %d): CPU %.4f %% of a core over %d s\n", static_cast<int>(watchdog), w,
                  seconds);
    }
    if (maps) {
      for (auto& [kb, name] : largestMappings(pid, 40)) std::printf("         %6ld kB  %s\n", kb, name.c_str());
    }
  }
  return 0;
}
