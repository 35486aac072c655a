// The adapter's writes mode against real postgres: a stop or a shutdown of writes takes
// effect while an apply of the primary is held in `pg_ctl start` (a pg_ctl wrapper in a
// binDir of the test's own), and no apply lifts it; a client that loops
// `SET synchronous_commit = local; INSERT` gets nothing acknowledged that it sent after
// the stop returned.
#include "pg/adapter.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include "pg/command.h"
#include "pg/controller.h"
#include "pg/testing/pg_test_cluster.h"

namespace dugong::pg {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::PgTestCluster;
using testing::PgTestNode;

constexpr auto kDeadline = 60s;

// A binDir whose pg_ctl holds `pg_ctl start` while a file exists: before it runs the real
// one (`holdBefore`: no postmaster yet) or after (`holdAfter`: the postmaster is up and
// accepts connections, the apply has not seen the start end). Bounded: 30 s each.
struct HeldBinDir {
  std::string dir;
  std::string holdBefore;
  std::string holdAfter;

  HeldBinDir(const PgTestNode& node) {
    dir = node.dir + "/held-bin";
    holdBefore = node.dir + "/hold-before-start";
    holdAfter = node.dir + "/hold-after-start";
    fs::create_directories(dir);
    for (const auto& entry : fs::directory_iterator(node.options.binDir)) {
      const std::string name = entry.path().filename().string();
      if (name != "pg_ctl") fs::create_symlink(entry.path(), dir + "/" + name);
    }
    std::ofstream script(dir + "/pg_ctl");
    const std::string wait = "i=0; while [ -e \"$H\" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n";
    script << "#!/bin/sh\n"
           << "if [ \"$1\" = start ]; then H='" << holdBefore << "'; " << wait << "fi\n"
           << "'" << node.options.binDir << "/pg_ctl' \"$@\"; rc=$?\n"
           << "if [ \"$1\" = start ]; then H='" << holdAfter << "'; " << wait << "fi\n"
           << "exit $rc\n";
    script.close();
    fs::permissions(dir + "/pg_ctl", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                         fs::perms::others_read | fs::perms::others_exec);
    fs::permissions(node.dir, fs::perms::others_exec, fs::perm_options::add);
  }
  static void hold(const std::string& path) { std::ofstream(path).put('\n'); }
  static void release(const std::string& path) { fs::remove(path); }
};

// A client that loops `SET synchronous_commit = local; INSERT INTO t VALUES (n)` with
// n = 1, 2, ..., reconnecting whenever its session is gone. `sent` is the n about to be
// sent, `acked` the last n acknowledged.
class LocalCommitClient {
 public:
  explicit LocalCommitClient(std::string conninfo) : conninfo_(std::move(conninfo)) {
    thread_ = std::thread([this] { run(); });
  }
  ~LocalCommitClient() { stop(); }
  void stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t sent() const { return sent_; }
  int64_t acked() const { return acked_; }
  int64_t attempts() const { return attempts_; }

 private:
  void run() {
    PGconn* conn = nullptr;
    int64_t n = 0;
    while (!done_) {
      if (!conn || PQstatus(conn) != CONNECTION_OK) {
        if (conn) PQfinish(conn);
        conn = PQconnectdb((conninfo_ + " connect_timeout=2").c_str());
        if (PQstatus(conn) != CONNECTION_OK) {
          std::this_thread::sleep_for(10ms);
          ++attempts_;
          continue;
        }
      }
      sent_ = ++n;
      ++attempts_;
      PGresult* r = PQexec(conn, ("SET synchronous_commit = local; INSERT INTO t VALUES (" + std::to_string(n) + ")").c_str());
      if (PQresultStatus(r) == PGRES_COMMAND_OK) acked_ = n;
      PQclear(r);
      std::this_thread::sleep_for(2ms);
    }
    if (conn) PQfinish(conn);
  }

  std::string conninfo_;
  std::atomic<bool> done_{false};
  std::atomic<int64_t> sent_{0};
  std::atomic<int64_t> acked_{0};
  std::atomic<int64_t> attempts_{0};
  std::thread thread_;
};

class AdapterWritesTest : public ::testing::Test {
 protected:
  // A writable primary with table t, stopped, and an adapter whose pg_ctl is held.
  PgAdapter& stoppedPrimaryWithHeldStart(PgTestNode& a, HeldBinDir& bin) {
    {
      auto plain = PgAdapter::create(loop_, a.options);
      EXPECT_TRUE(plain.ok()) << plain.error();
      auto& pa = *plain.value();
      std::optional<PgConfigApplied> r;
      pa.apply(PgConfig::firstPrimary(std::nullopt), [&](PgConfigApplied x) { r = x; });
      EXPECT_TRUE(testing::runUntil(loop_, [&] { return r.has_value(); }, kDeadline));
      EXPECT_TRUE(r && r->ok) << (r ? r->error : "no answer");
      EXPECT_EQ(a.value("CREATE TABLE t (id bigint)"), "");
      a.forceStop();
    }
    PgOptions held = a.options;
    held.binDir = bin.dir;
    auto created = PgAdapter::create(loop_, held);
    EXPECT_TRUE(created.ok()) << created.error();
    adapter_ = std::move(created).value();
    return *adapter_;
  }

  template <class T>
  bool until(const std::optional<T>& v, std::chrono::milliseconds deadline = kDeadline) {
    return testing::runUntil(loop_, [&] { return v.has_value(); }, deadline);
  }
  bool runFor(std::chrono::milliseconds d) {
    const auto end = std::chrono::steady_clock::now() + d;
    return testing::runUntil(loop_, [&] { return std::chrono::steady_clock::now() >= end; }, d + 1s);
  }

  PgTestCluster cluster_{"dugong-pg-writes"};
  boost::asio::io_context loop_;
  std::unique_ptr<PgAdapter> adapter_;

  void TearDown() override { adapter_.reset(); }
};

// The apply of the primary is held after its postmaster came up writable: a stop of
// writes returns before the apply ends, nothing sent after it is acknowledged, and the
// apply's end leaves the primary read-only until resumeWrites.
TEST_F(AdapterWritesTest, AStopDuringAPrimarysStartTakesEffectAtOnceAndTheApplyKeepsIt) {
  PgTestNode& a = cluster_.addNode("peer-a");
  HeldBinDir bin(a);
  PgAdapter& pa = stoppedPrimaryWithHeldStart(a, bin);
  HeldBinDir::hold(bin.holdAfter);
  std::optional<PgConfigApplied> applied;
  pa.apply(PgConfig::firstPrimary(std::nullopt), [&](PgConfigApplied r) { applied = r; });
  LocalCommitClient client(a.conninfo());
  // The window: up and writable, the apply still in pg_ctl start.
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return client.acked() > 0; }, kDeadline));
  ASSERT_FALSE(applied.has_value());

  std::optional<Result<WritesStopped>> stopped;
  pa.stopWrites([&](Result<WritesStopped> r) { stopped = std::move(r); });
  ASSERT_TRUE(until(stopped, 20s)) << "stopWrites waited for the apply";
  const int64_t sentBeforeStop = client.sent();
  EXPECT_FALSE(applied.has_value()) << "the apply ended before the stop returned";
  ASSERT_TRUE(stopped->ok()) << stopped->error();

  runFor(500ms);
  HeldBinDir::release(bin.holdAfter);
  ASSERT_TRUE(until(applied));
  ASSERT_TRUE(applied->ok) << applied->error;
  const int64_t attemptsAtApply = client.attempts();
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return client.attempts() > attemptsAtApply + 50; }, kDeadline));
  client.stop();
  EXPECT_LE(client.acked(), sentBeforeStop) << "an INSERT sent after stopWrites returned was acknowledged";
  EXPECT_EQ(a.value("SHOW default_transaction_read_only"), "on") << "the apply lifted the stop";

  std::optional<Result<bool>> resumed;
  pa.resumeWrites([&](Result<bool> r) { resumed = std::move(r); });
  ASSERT_TRUE(until(resumed));
  ASSERT_TRUE(resumed->ok()) << resumed->error();
  EXPECT_EQ(a.value("SET synchronous_commit = local; INSERT INTO t VALUES (0)"), "");
}

// The apply of the primary is held before its postmaster exists: a shutdown of writes
// stops the postmaster that the start then spawns, before it accepts a connection, and
// the apply reports postgres stopped. An apply after it leaves it stopped too; once
// resumed, an apply starts it writable.
TEST_F(AdapterWritesTest, AShutdownDuringAPrimarysStartStopsTheStartingPostmaster) {
  PgTestNode& a = cluster_.addNode("peer-a");
  HeldBinDir bin(a);
  PgAdapter& pa = stoppedPrimaryWithHeldStart(a, bin);
  HeldBinDir::hold(bin.holdBefore);
  std::optional<PgConfigApplied> applied;
  pa.apply(PgConfig::firstPrimary(std::nullopt), [&](PgConfigApplied r) { applied = r; });
  runFor(300ms);
  std::optional<Result<bool>> down;
  pa.shutDownWrites([&](Result<bool> r) { down = std::move(r); });
  runFor(300ms);
  LocalCommitClient client(a.conninfo());
  HeldBinDir::release(bin.holdBefore);
  ASSERT_TRUE(until(applied));
  EXPECT_TRUE(applied->ok) << applied->error;
  EXPECT_FALSE(applied->online);
  ASSERT_TRUE(until(down));
  EXPECT_TRUE(down->ok()) << down->error();
  EXPECT_FALSE(a.postmasterPid().has_value()) << "postgres runs after a shutdown of writes";
  client.stop();
  EXPECT_EQ(client.acked(), 0) << "a commit was acknowledged by a primary started after a shutdown of writes";

  // Another apply while shut down: still stopped.
  applied.reset();
  pa.apply(PgConfig::firstPrimary(std::nullopt), [&](PgConfigApplied r) { applied = r; });
  ASSERT_TRUE(until(applied));
  EXPECT_TRUE(applied->ok) << applied->error;
  EXPECT_FALSE(applied->online);
  EXPECT_FALSE(a.postmasterPid().has_value());

  std::optional<Result<bool>> resumed;
  pa.resumeWrites([&](Result<bool> r) { resumed = std::move(r); });
  ASSERT_TRUE(until(resumed));
  ASSERT_TRUE(resumed->ok()) << resumed->error();
  applied.reset();
  pa.apply(PgConfig::firstPrimary(std::nullopt), [&](PgConfigApplied r) { applied = r; });
  ASSERT_TRUE(until(applied));
  ASSERT_TRUE(applied->ok) << applied->error;
  EXPECT_TRUE(applied->online);
  EXPECT_EQ(a.value("SET synchronous_commit = local; INSERT INTO t VALUES (0)"), "");
}

// An operator's restart (POST /restart, a request node) races the lease's end: the
// shutdown's signal hits the postmaster the restart stops anyway, and the restart used to
// start a new one that ran past the deadline until the queued shutdown got the lock
// (safety review of 2f035ac, item 6). The postmaster the restart spawns is signalled as
// it starts, the restart reports the shutdown, and a restart while shut down is refused.
TEST_F(AdapterWritesTest, AnOperatorsRestartDuringAShutdownOfWritesLeavesPostgresStopped) {
  PgTestNode& a = cluster_.addNode("peer-a");
  HeldBinDir bin(a);
  PgAdapter& pa = stoppedPrimaryWithHeldStart(a, bin);
  std::optional<PgConfigApplied> applied;
  pa.apply(PgConfig::firstPrimary(std::nullopt), [&](PgConfigApplied r) { applied = r; });
  ASSERT_TRUE(until(applied));
  ASSERT_TRUE(applied->ok && applied->online) << applied->error;
  HeldBinDir::hold(bin.holdBefore);
  std::optional<Result<bool>> restarted;
  pa.restartInPlace([&](Result<bool> r) { restarted = std::move(r); });
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return !a.postmasterPid().has_value(); }, kDeadline))
      << "the restart never stopped postgres";
  std::optional<Result<bool>> down;
  pa.shutDownWrites([&](Result<bool> r) { down = std::move(r); });
  runFor(300ms);
  LocalCommitClient client(a.conninfo());
  HeldBinDir::release(bin.holdBefore);
  ASSERT_TRUE(until(restarted));
  EXPECT_FALSE(restarted->ok()) << "the restart reported success under a shutdown of writes";
  ASSERT_TRUE(until(down));
  EXPECT_TRUE(down->ok()) << down->error();
  EXPECT_FALSE(a.postmasterPid().has_value()) << "postgres runs after a shutdown of writes";
  client.stop();
  EXPECT_EQ(client.acked(), 0) << "a commit was acknowledged by a primary the restart started after the shutdown";

  restarted.reset();
  pa.restartInPlace([&](Result<bool> r) { restarted = std::move(r); });
  ASSERT_TRUE(until(restarted));
  EXPECT_FALSE(restarted->ok());
  EXPECT_FALSE(a.postmasterPid().has_value());
}

// A fence held in its verify loop (it holds the apply lock) does not delay a stop of
// writes, and its end does not lift it.
TEST_F(AdapterWritesTest, AStopDuringAFenceTakesEffectAtOnce) {
  PgTestNode& a = cluster_.addNode("peer-a");
  PgTestNode& b = cluster_.addNode("peer-b");
  auto created = PgAdapter::create(loop_, a.options);
  ASSERT_TRUE(created.ok()) << created.error();
  adapter_ = std::move(created).value();
  PgAdapter& pa = *adapter_;
  std::optional<PgConfigApplied> applied;
  pa.apply(PgConfig::firstPrimary(std::nullopt), [&](PgConfigApplied r) { applied = r; });
  ASSERT_TRUE(until(applied));
  ASSERT_TRUE(applied->ok) << applied->error;
  ASSERT_EQ(a.value("CREATE TABLE t (id bigint)"), "");

  std::atomic<bool> held{true};
  std::atomic<bool> inVerify{false};
  pa.setTestHook([&](const std::string& point) {
    if (point != "fence:verify") return;
    inVerify = true;
    for (int i = 0; held && i < 600; ++i) std::this_thread::sleep_for(50ms);
  });
  std::optional<PgFenced> fenced;
  pa.fence(b.identity, [&](PgFenced r) { fenced = r; });
  LocalCommitClient client(a.conninfo());
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return inVerify && client.acked() > 0; }, kDeadline));

  std::optional<Result<WritesStopped>> stopped;
  pa.stopWrites([&](Result<WritesStopped> r) { stopped = std::move(r); });
  ASSERT_TRUE(until(stopped, 20s)) << "stopWrites waited for the fence";
  const int64_t sentBeforeStop = client.sent();
  EXPECT_FALSE(fenced.has_value());
  ASSERT_TRUE(stopped->ok()) << stopped->error();
  runFor(300ms);
  held = false;
  ASSERT_TRUE(until(fenced));
  const int64_t attemptsAtFence = client.attempts();
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return client.attempts() > attemptsAtFence + 50; }, kDeadline));
  client.stop();
  EXPECT_LE(client.acked(), sentBeforeStop) << "an INSERT sent after stopWrites returned was acknowledged";
  EXPECT_EQ(a.value("SHOW default_transaction_read_only"), "on");
}


// A stopped postmaster (SIGSTOP) acts on none of pg_ctl's signals while its backends go on
// committing: a shutdown of writes kills its process group, and nothing sent after the
// shutdown returned is acknowledged.
TEST_F(AdapterWritesTest, AShutdownKillsAStoppedPostmasterAndItsBackends) {
  PgTestNode& a = cluster_.addNode("peer-a");
  auto created = PgAdapter::create(loop_, a.options);
  ASSERT_TRUE(created.ok()) << created.error();
  adapter_ = std::move(created).value();
  std::optional<PgConfigApplied> applied;
  adapter_->apply(PgConfig::firstPrimary(std::nullopt), [&](PgConfigApplied r) { applied = r; });
  ASSERT_TRUE(until(applied));
  ASSERT_TRUE(applied->ok) << applied->error;
  ASSERT_EQ(a.value("CREATE TABLE t (id bigint)"), "");
  LocalCommitClient client(a.conninfo());
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return client.acked() > 0; }, kDeadline));
  const auto pid = a.postmasterPid();
  ASSERT_TRUE(pid.has_value());
  EXPECT_EQ(::getpgid(*pid), *pid) << "the postmaster does not lead a process group of its own";
  ASSERT_TRUE(a.signalPostmaster(SIGSTOP));
  const int64_t ackedAtStop = client.acked();
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return client.acked() > ackedAtStop + 5; }, kDeadline))
      << "the backends of a stopped postmaster no longer commit: the test shows nothing";

  std::optional<Result<bool>> down;
  adapter_->shutDownWrites([&](Result<bool> r) { down = std::move(r); });
  ASSERT_TRUE(until(down, 20s)) << "the shutdown waits on pg_ctl's stop of a postmaster that acts on nothing";
  const int64_t sentAtDown = client.sent();
  EXPECT_TRUE(down->ok()) << down->error();
  EXPECT_FALSE(a.postmasterPid().has_value()) << "the stopped postmaster still runs";
  const int64_t attemptsAtDown = client.attempts();
  ASSERT_TRUE(testing::runUntil(loop_, [&] { return client.attempts() > attemptsAtDown + 20; }, kDeadline));
  client.stop();
  EXPECT_LE(client.acked(), sentAtDown) << "an INSERT sent after the shutdown returned was acknowledged";
}
}  // namespace
}  // namespace dugong::pg
