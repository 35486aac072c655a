// `dugong-adm restart --rolling` when the roles change between two of its steps (issue
// 40): the cluster simulator once restarted a peer that had become primary meanwhile as
// the standby it had been planned as. Here the rolling restart waits for the async's
// replay (paused by the test) before its first step, a switchover to the sync happens
// meanwhile, and the replay resumes: the command must stop with the reason, and must not
// restart the new primary in place as if it were the sync it was planned as (a write
// gap, then a wait for it to stream that ends only with --wait).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "pg/command.h"
#include "tests/e2e/cluster_harness.h"

namespace dugong::e2e {
namespace {

using namespace std::chrono_literals;

struct AdmResult {
  int code = -1;
  std::string output;
};

class RollingRestartRoles : public ::testing::Test {
 protected:
  void SetUp() override {
    HarnessOptions o;
    o.cluster = "rollroles";
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    ASSERT_GE(h_->waitForHealthyCluster(2, 180s), 0) << h_->describe();
  }
  void TearDown() override {
    if (HasFailure() && h_) std::cerr << h_->describe();
  }

  pg::CommandSpec adm(std::vector<std::string> args, std::chrono::seconds timeout) const {
    pg::CommandSpec spec;
    spec.argv = {DUGONG_ADM_BINARY, "-z", h_->zkConnect(), "-c", h_->options().cluster};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.timeout = timeout;
    return spec;
  }

  std::string startTime(int i) { return h_->peer(i).pg->value("SELECT pg_postmaster_start_time()::text"); }

  std::unique_ptr<Harness> h_;
};

TEST_F(RollingRestartRoles, APeerThatBecamePrimaryBetweenTwoStepsIsNotRestartedAsAStandby) {
  const int primary = h_->indexWithRole("primary");
  const int sync = h_->indexWithRole("sync");
  const int async = h_->indexWithRole("async");
  ASSERT_TRUE(primary >= 0 && sync >= 0 && async >= 0);
  const std::string S = h_->peer(sync).id;

  // The async's replay paused, and WAL written after it: the rolling restart's first
  // step (the async, the end of the chain) waits for a replay position it cannot reach.
  ASSERT_TRUE(h_->sql(async, "SELECT pg_wal_replay_pause()").ok());
  ASSERT_TRUE(h_->sql(primary, "CREATE TABLE rolled (id int)").ok());
  ASSERT_TRUE(h_->sql(primary, "INSERT INTO rolled SELECT generate_series(1, 1000)").ok());
  std::this_thread::sleep_for(2s);  // the primary's /state samples its position every second

  AdmResult rolling;
  std::thread restart([&] {
    const pg::CommandResult r = pg::runCommand(adm({"restart", "--rolling", "--wait", "90"}, 240s));
    rolling = {r.exitCode, r.output};
  });
  // Its output is read once it ends; meanwhile the async's replay is what it waits for.
  ASSERT_TRUE(h_->waitFor(
      [&] {
        auto st = h_->status(async);
        return st && st->contains("postgres") && (*st)["postgres"].value("replayPaused", false);
      },
      30s));
  std::this_thread::sleep_for(3s);  // the command has read the plan and waits for A's replay

  // A switchover to the sync meanwhile: S becomes primary.
  const pg::CommandResult sw = pg::runCommand(adm({"switchover", "--wait-writable", "90"}, 150s));
  EXPECT_TRUE(sw.ok()) << "the switchover failed (exit " << sw.exitCode << "):\n" << sw.output;
  // Let the async replay again: it follows the new timeline, and the command goes on.
  ASSERT_TRUE(h_->sql(async, "SELECT pg_wal_replay_resume()").ok());
  ASSERT_TRUE(h_->waitFor([&] { return h_->writablePrimary() == sync; }, 120s)) << S << " is not primary";
  const std::string syncStarted = startTime(sync);
  restart.join();

  EXPECT_NE(rolling.code, 0) << rolling.output;
  EXPECT_NE(rolling.output.find("the primary changed since this restart began"), std::string::npos) << rolling.output;
  EXPECT_EQ(rolling.output.find("restarting postgres on " + S), std::string::npos)
      << "the new primary " << S << " was restarted as the sync it was planned as:\n"
      << rolling.output;
  EXPECT_EQ(startTime(sync), syncStarted) << "the new primary's postgres was restarted";
  EXPECT_EQ(h_->writablePrimary(), sync);
}

}  // namespace
}  // namespace dugong::e2e
