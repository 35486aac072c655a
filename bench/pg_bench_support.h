// Helpers shared by the postgres benchmarks (pg_role_bench, rewind_bench): timing,
// results as JSON, and waits that end the benchmark with a message on failure.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "pg/controller.h"
#include "pg/testing/pg_test_cluster.h"

namespace dugong::bench {

using namespace std::chrono_literals;
using pg::PgController;
using pg::testing::PgTestNode;

inline nlohmann::json results = nlohmann::json::object();

inline double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

inline void record(const std::string& name, double secs) {
  results[name] = secs;
  std::printf("%-45s %8.3f s\n", name.c_str(), secs);
  std::fflush(stdout);
}

inline void must(const dugong::PgConfigApplied& r, const char* what) {
  if (!r.ok) {
    std::fprintf(stderr, "%s failed: %s\n", what, r.error.c_str());
    std::exit(1);
  }
}

inline void mustSql(const PgTestNode& n, const std::string& sql, std::chrono::milliseconds timeout = 3600s) {
  auto r = n.sql(sql, timeout);
  if (!r) {
    std::fprintf(stderr, "%s on %s failed: %s\n", sql.c_str(), n.id.c_str(), r.error().c_str());
    std::exit(1);
  }
}

inline void waitFor(const std::function<bool()>& condition, const char* what) {
  if (!dugong::pg::testing::eventually(condition, 600s)) {
    std::fprintf(stderr, "timed out waiting for %s\n", what);
    std::exit(1);
  }
}

inline bool streamsFrom(const PgTestNode& upstream, const PgTestNode& standby) {
  return upstream.value("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND application_name = '" +
                        standby.id + "'") == "1";
}

inline void waitWritable(PgController& pp, const PgTestNode& primary) {
  waitFor([&] {
    pp.pollWritable();
    return primary.value("SHOW default_transaction_read_only") == "off";
  }, "the primary to become writable");
}

}  // namespace dugong::bench
