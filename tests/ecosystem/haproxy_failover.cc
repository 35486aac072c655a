#include "tests/ecosystem/haproxy_failover.h"

#include <thread>

namespace dugong::ecosystem {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const char* const kCreate = "CREATE TABLE IF NOT EXISTS through_haproxy (id serial PRIMARY KEY, at timestamptz DEFAULT now())";
const char* const kWrite = "INSERT INTO through_haproxy DEFAULT VALUES";

std::string describe(const ProbeResult& p) {
  return "postgres on port " + std::to_string(p.serverPort) + (p.inRecovery ? " (in recovery)" : "") +
         (p.ok ? " acknowledged" : " refused: " + p.error);
}

}  // namespace

std::vector<HaproxyServer> haproxyServers(e2e::Harness& h) {
  std::vector<HaproxyServer> out;
  for (int i = 0; i < h.size(); ++i) out.push_back({h.peer(i).id, h.peer(i).pg->port, h.peer(i).httpPort});
  return out;
}

FailoverThroughHaproxy failOverThroughHaproxy(e2e::Harness& h, int primary, const HaproxyProcess& haproxy,
                                              bool killPostgresToo, std::chrono::milliseconds timeout) {
  FailoverThroughHaproxy out;
  out.oldPort = h.peer(primary).pg->port;
  const std::string oldId = h.peer(primary).id;
  // HAProxy needs rise x inter to find the primary after it starts.
  if (!h.waitFor([&] { return probeThrough(haproxy.writePort(), kCreate).ok; }, 30s)) {
    out.error = "no write through HAProxy before the failover";
    return out;
  }
  const auto t0 = Clock::now();
  h.killAgent(primary);
  if (killPostgresToo) h.killPostgres(primary);
  bool deposed = false;
  auto next = Clock::now();
  while (Clock::now() - t0 < timeout) {
    next += 100ms;
    const ProbeResult p = probeThrough(haproxy.writePort(), kWrite);
    const auto at = Clock::now();
    if (p.connected && p.serverPort == out.oldPort && deposed) {
      out.violations.push_back("after " + oldId + " was deposed, HAProxy handed a client to it: " + describe(p));
    }
    if (p.ok) ++out.writes;
    if (p.ok && p.serverPort != out.oldPort && out.newPort == 0) {
      out.newPort = p.serverPort;
      out.seconds = std::chrono::duration<double>(at - t0).count();
    }
    if (!deposed) {
      auto s = h.zkState();
      deposed = s && containsPeer(s->deposed, oldId);
    }
    if (deposed && out.newPort != 0) break;
    std::this_thread::sleep_until(std::max(next, Clock::now()));
  }
  if (out.newPort == 0) {
    out.error = "no write through HAProxy reached another peer within the timeout";
  } else if (!deposed) {
    out.error = oldId + " was never listed as deposed";
  } else {
    out.ok = true;
  }
  return out;
}

std::vector<std::string> writeThroughHaproxy(const HaproxyProcess& haproxy, int forbiddenPort,
                                             std::chrono::milliseconds duration, int* writes) {
  std::vector<std::string> violations;
  const auto end = Clock::now() + duration;
  while (Clock::now() < end) {
    const ProbeResult p = probeThrough(haproxy.writePort(), kWrite);
    if (p.connected && p.serverPort == forbiddenPort) {
      violations.push_back("HAProxy handed a client to the deposed peer: " + describe(p));
    }
    if (p.ok) ++*writes;
    std::this_thread::sleep_for(100ms);
  }
  return violations;
}

}  // namespace dugong::ecosystem
