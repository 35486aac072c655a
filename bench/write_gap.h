// A client for write-gap benchmarks: inserts one row after another into `acked` through
// a connection string (2 s timeout, 20 ms apart; a new connection per insert, or one kept
// while it works), records
// each acknowledgement, and reports the longest gap between two of them.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pg/connection.h"
#include "pg/sql.h"

namespace dugong::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Writer {
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::pair<std::chrono::steady_clock::time_point, int>> acked;  // completion time, id
  std::thread thread;
  int nextId = 1;

  // Keep one connection (reconnecting after an error) instead of one per insert: the
  // gap then shows only what the server does, not connection set-up (scram) under load.
  bool persistent = false;

  void start(const std::string& conninfo) {
    stop = false;
    thread = std::thread([this, conninfo] {
      std::unique_ptr<dugong::pg::Connection> conn;
      while (!stop) {
        int id = nextId++;
        const std::string sql = "INSERT INTO acked VALUES (" + std::to_string(id) + ")";
        bool r = false;
        if (!persistent) {
          r = dugong::pg::runQuery(conninfo, sql, std::chrono::seconds(2)).ok();
        } else {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
          if (!conn) {
            auto opened = dugong::pg::Connection::open(conninfo, deadline);
            if (opened) conn = std::move(opened).value();
          }
          if (conn) {
            r = conn->query(sql, deadline).ok();
            if (!r) conn.reset();
          }
        }
        if (r) {
          std::lock_guard<std::mutex> l(mu);
          acked.emplace_back(std::chrono::steady_clock::now(), id);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  void finish() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  // Longest gap between consecutive acknowledgements within [from, to].
  double longestGapMs(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
    std::lock_guard<std::mutex> l(mu);
    std::optional<std::chrono::steady_clock::time_point> prev;
    double worst = 0;
    for (const auto& [t, id] : acked) {
      if (t < from) {
        prev = t;
        continue;
      }
      if (prev) worst = std::max(worst, std::chrono::duration<double, std::milli>(std::min(t, to) - *prev).count());
      if (t > to) break;
      prev = t;
    }
    return worst;
  }
};

}  // namespace dugong::bench
