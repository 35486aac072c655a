// Unplanned failover, measured the way HA managers are compared.
//
// For each run: a fresh 3-peer cluster (real ZooKeeper, postgres, agents). A client
// inserts one row with a client-chosen id every 100 ms through a multi-host libpq
// connection string with target_session_attrs=read-write, reconnecting on error, and
// records every acknowledgement. T0 is just before SIGKILL of the primary's agent and
// postmaster; T1 is the first acknowledged insert on another peer. Afterwards every
// acknowledged id is looked up on the new primary.
//
//   failover_bench [--runs N] [--session-timeouts 2000,10000]
#include <libpq-fe.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_harness.h"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct Ack {
  int id;
  Clock::time_point at;
  std::string port;
};

class Client {
 public:
  explicit Client(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  void start() {
    thread_ = std::thread([this] { run(); });
  }
  void stop() {
    stop_ = true;
    thread_.join();
  }
  std::vector<Ack> acks() {
    std::lock_guard lock(mu_);
    return acks_;
  }

 private:
  void run() {
    PGconn* conn = nullptr;
    int next = 1;
    auto tick = Clock::now();
    while (!stop_) {
      tick += 100ms;
      if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
        if (conn) PQfinish(conn);
        conn = PQconnectdb(conninfo_.c_str());
      }
      if (PQstatus(conn) == CONNECTION_OK) {
        const int id = next++;
        std::string sql = "INSERT INTO failover (id) VALUES (" + std::to_string(id) + ")";
        PGresult* r = PQexec(conn, sql.c_str());
        if (PQresultStatus(r) == PGRES_COMMAND_OK) {
          std::lock_guard lock(mu_);
          acks_.push_back({id, Clock::now(), PQport(conn)});
        } else {
          PQfinish(conn);
          conn = nullptr;
        }
        PQclear(r);
      }
      std::this_thread::sleep_until(std::max(tick, Clock::now()));
    }
    if (conn) PQfinish(conn);
  }

  std::string conninfo_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Ack> acks_;
};

struct RunResult {
  bool ok = false;
  double seconds = 0;
  size_t acked = 0;
  size_t lost = 0;
  std::string error;
};

RunResult runOnce(int sessionTimeoutMs) {
  RunResult out;
  dugong::e2e::HarnessOptions o;
  o.sessionTimeoutMs = sessionTimeoutMs;
  dugong::e2e::Harness h(o);
  h.startAll();
  int primary = h.waitForHealthyCluster(2, 180s);
  if (primary < 0) return {false, 0, 0, 0, "the cluster did not come up"};
  auto created = h.sql(primary, "CREATE TABLE failover (id int PRIMARY KEY, at timestamptz DEFAULT now())");
  if (!created) return {false, 0, 0, 0, created.error()};
  // A statement that waits for a sync is cancelled after 5 s, and the client reconnects.
  Client client(h.multiHostConninfo() + " options='-c statement_timeout=5000'");
  client.start();
  std::this_thread::sleep_for(3s);
  const std::string oldPort = std::to_string(h.peer(primary).pg->port);
  const auto t0 = Clock::now();
  h.killAgent(primary);
  h.killPostgres(primary);
  std::optional<Clock::time_point> t1;
  h.waitFor(
      [&] {
        for (const auto& a : client.acks()) {
          if (a.at > t0 && a.port != oldPort) {
            t1 = a.at;
            return true;
          }
        }
        return false;
      },
      std::chrono::milliseconds(sessionTimeoutMs * 6 + 60000));
  std::this_thread::sleep_for(1s);
  client.stop();
  if (!t1) return {false, 0, client.acks().size(), 0, "no acknowledged insert on another peer"};
  int now = h.writablePrimary();
  if (now < 0) return {false, 0, 0, 0, "no writable primary after the failover"};
  std::set<int> present;
  auto rows = h.sql(now, "SELECT id FROM failover");
  if (!rows) return {false, 0, 0, 0, rows.error()};
  for (const auto& r : rows->rows) present.insert(std::stoi(r[0].value_or("0")));
  auto acks = client.acks();
  out.acked = acks.size();
  for (const auto& a : acks) out.lost += present.count(a.id) ? 0 : 1;
  out.ok = true;
  out.seconds = std::chrono::duration<double>(*t1 - t0).count();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 10;
  std::vector<int> timeouts = {2000, 10000};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::stoi(argv[++i]);
    } else if (a == "--session-timeouts" && i + 1 < argc) {
      timeouts.clear();
      std::stringstream in(argv[++i]);
      for (std::string t; std::getline(in, t, ',');) timeouts.push_back(std::stoi(t));
    } else {
      std::fprintf(stderr, "usage: failover_bench [--runs N] [--session-timeouts MS,MS...]\n");
      return 2;
    }
  }
  bool anyLoss = false;
  for (int timeout : timeouts) {
    std::vector<double> times;
    size_t lost = 0, acked = 0;
    for (int r = 1; r <= runs; ++r) {
      RunResult res = runOnce(timeout);
      if (!res.ok) {
        std::printf("session timeout %5d ms  run %2d: FAILED: %s\n", timeout, r, res.error.c_str());
        continue;
      }
      times.push_back(res.seconds);
      lost += res.lost;
      acked += res.acked;
      std::printf("session timeout %5d ms  run %2d: T1-T0 = %6.2f s, %zu acknowledged, %zu lost\n", timeout, r,
                  res.seconds, res.acked, res.lost);
      std::fflush(stdout);
    }
    if (times.empty()) continue;
    std::sort(times.begin(), times.end());
    double median = times.size() % 2 ? times[times.size() / 2]
                                     : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
    std::printf("SUMMARY session timeout %d ms: %zu runs, T1-T0 median %.2f s, max %.2f s, min %.2f s; "
                "%zu acknowledged rows, %zu lost\n",
                timeout, times.size(), median, times.back(), times.front(), acked, lost);
    anyLoss = anyLoss || lost > 0;
  }
  return anyLoss ? 1 : 0;
}
