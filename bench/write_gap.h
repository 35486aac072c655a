// A client for write-gap benchmarks: inserts one row after another into `acked` through
// a connection string (a new connection per insert, 2 s timeout, 20 ms apart), records
// each acknowledgement, and reports the longest gap between two of them.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

  void start(const std::string& conninfo) {
    stop = false;
    thread = std::thread([this, conninfo] {
      while (!stop) {
        int id = nextId++;
        auto r = dugong::pg::runQuery(conninfo, "INSERT INTO acked VALUES (" + std::to_string(id) + ")", std::chrono::seconds(2));
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
