// Helpers shared by the standby-cluster benchmarks (standby_cluster_bench,
// site_return_bench): elapsed time, a program run with the test superuser's password, and
// the standby cluster's leader.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "pg/command.h"
#include "pg/testing/pg_test_cluster.h"
#include "tests/e2e/cluster_harness.h"

namespace dugong::bench {

inline double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// `argv` run with PGPASSWORD set to the test clusters' superuser password.
inline pg::CommandResult runWithPassword(std::vector<std::string> argv, std::chrono::seconds timeout) {
  pg::CommandSpec spec;
  spec.argv = std::move(argv);
  spec.timeout = timeout;
  spec.env = {{"PGPASSWORD", pg::testing::kTestSuperuserPassword}};
  return pg::runCommand(spec);
}

// The standby leader (its /standby-leader answers 200), or -1.
inline int standbyLeader(e2e::Harness& h) {
  for (int i = 0; i < h.size(); ++i) {
    if (h.httpStatus(i, "/standby-leader") == 200) return i;
  }
  return -1;
}

}  // namespace dugong::bench
