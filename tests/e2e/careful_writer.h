// A client of the tests that inserts one row every 20 ms into table `acked` through a
// connection string (the multi-host one), one new connection per row with a 2 s bound,
// and remembers which rows were acknowledged (a failed or unanswered insert is not: it
// may or may not have committed) and the longest time between two acknowledgements.
// With Connections::kKept it keeps its connection as an application's pool does, and
// opens a new one (the same multi-host string) only after a failed insert.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "pg/connection.h"
#include "pg/sql.h"

namespace dugong::e2e {

class CarefulWriter {
 public:
  enum class Connections { kPerRow, kKept };
  // `firstId`: the first row's id (two writers at once into the same table: ranges apart).
  explicit CarefulWriter(std::string conninfo, int firstId = 1, Connections connections = Connections::kPerRow)
      : next_(firstId), thread_([this, c = std::move(conninfo), connections] { run(c, connections); }) {}
  ~CarefulWriter() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // The id the next insert will use.
  int nextId() const { return next_.load(); }
  size_t ackedSince(int firstId) {
    std::lock_guard lock(mu_);
    return static_cast<size_t>(std::distance(acked_.lower_bound(firstId), acked_.end()));
  }
  std::set<int> acked() {
    std::lock_guard lock(mu_);
    return acked_;
  }
  std::chrono::milliseconds longestGap() {
    std::lock_guard lock(mu_);
    return std::chrono::duration_cast<std::chrono::milliseconds>(longestGap_);
  }
  // When the longest gap ended (its acknowledgement); none before two acknowledgements.
  std::optional<std::chrono::steady_clock::time_point> longestGapEnd() {
    std::lock_guard lock(mu_);
    return longestGapEnd_;
  }
  // The longest gap measured from now on (the next one still counts from the last
  // acknowledgement).
  void resetLongestGap() {
    std::lock_guard lock(mu_);
    longestGap_ = {};
    longestGapEnd_.reset();
  }

 private:
  // One insert: on a new connection, or on the kept one (opened again after a failure).
  bool insert(const std::string& conninfo, Connections connections, std::unique_ptr<pg::Connection>& kept, int id) {
    const std::string sql = "INSERT INTO acked VALUES (" + std::to_string(id) + ")";
    if (connections == Connections::kPerRow) return pg::runQuery(conninfo, sql, std::chrono::seconds(2)).ok();
    if (!kept) {
      auto opened = pg::openForQueries(conninfo, std::chrono::seconds(2));
      if (!opened) return false;
      kept = std::move(opened.value());
    }
    const bool ok = pg::queryOn(*kept, sql, std::chrono::seconds(2)).ok();
    if (!ok) kept.reset();
    return ok;
  }

  void run(const std::string& conninfo, Connections connections) {
    std::unique_ptr<pg::Connection> kept;
    while (!stop_) {
      const int id = next_++;
      if (insert(conninfo, connections, kept, id)) {
        std::lock_guard lock(mu_);
        acked_.insert(id);
        const auto now = std::chrono::steady_clock::now();
        if (lastAck_ && now - *lastAck_ > longestGap_) {
          longestGap_ = now - *lastAck_;
          longestGapEnd_ = now;
        }
        lastAck_ = now;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::atomic<bool> stop_{false};
  std::atomic<int> next_;
  std::mutex mu_;
  std::set<int> acked_;
  std::optional<std::chrono::steady_clock::time_point> lastAck_;
  std::chrono::steady_clock::duration longestGap_{};
  std::optional<std::chrono::steady_clock::time_point> longestGapEnd_;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace dugong::e2e
