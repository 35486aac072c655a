// A restarted agent keeps its ZooKeeper session (Session::detach, ZkOptions::resume),
// and no Session destructor closes its handle on the caller's thread. Real ZooKeeper.
#include <atomic>
#include <functional>
#include <future>
#include <set>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "zk/handle_closer.h"
#include "zk/session.h"
#include "zk/test_util.h"

namespace dugong::zk {
namespace {

using namespace test;
using testing::ZooKeeperCluster;

// A case works on the run's shared server under a root of its own (CaseZooKeeper), or,
// when it forks (a client's threads must not exist then), on one of its own: it sets
// `zk` first.
class SessionRestartTest : public ::testing::Test {
 protected:
  void TearDown() override { detail::setBeforeCloseHookForTest(nullptr); }
  std::string connect() { return zk ? zk->connectString() : shared.connectString(); }

  std::unique_ptr<Peer> startPeer(const std::string& id, std::optional<SessionCredentials> resume = std::nullopt) {
    auto o = options(connect(), "c1", 6000);
    o.resume = std::move(resume);
    auto p = std::make_unique<Peer>(io, o, id);
    p->start();
    EXPECT_TRUE(p->waitInit()) << id << " was not initialized";
    return p;
  }

  boost::asio::io_context io;
  CaseZooKeeper shared;
  std::unique_ptr<ZooKeeperCluster> zk;
};

// What an agent restart does: a process joins, detaches and exits; its successor
// re-attaches. The first process is a fork of this one (forked before any session or
// thread exists here), so its exit is a real process exit. `beforeDetach` runs in it once
// it is initialized (false: it failed).
SessionCredentials runPeerThatDetachesAndExits(
    const std::string& connect, const std::function<bool(Peer&, boost::asio::io_context&)>& beforeDetach = nullptr) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    boost::asio::io_context childIo;
    auto o = options(connect, "c1", 6000);
    Peer p(childIo, o, "a");
    if (!p.session().start().ok() || !p.waitInit()) ::_exit(1);
    auto c = p.session().credentials();
    if (!c) ::_exit(2);
    if (beforeDetach && !beforeDetach(p, childIo)) ::_exit(4);
    std::string out = std::to_string(c->sessionId) + " " + c->password;
    p.session().detach();
    if (::write(fds[1], out.data(), out.size()) != static_cast<ssize_t>(out.size())) ::_exit(3);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string in;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) in.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the first process failed: " << status;
  SessionCredentials c;
  auto space = in.find(' ');
  if (space == std::string::npos) return c;
  c.sessionId = std::stoll(in.substr(0, space));
  c.password = in.substr(space + 1);
  return c;
}

TEST_F(SessionRestartTest, ADetachedSessionOutlivesItsProcessAndIsReattachedWithItsOwnElectionNode) {
  zk = ZooKeeperCluster::standalone();  // forks
  const SessionCredentials saved = runPeerThatDetachesAndExits(connect());
  ASSERT_NE(saved.sessionId, 0);
  ASSERT_EQ(saved.password.size(), 16u);

  // The process that held it is gone, but the session and its node are not.
  auto other = startPeer("b");
  EXPECT_EQ(other->active(), (std::vector<std::string>{"a", "b"}));
  auto c = client(connect(), "c1");
  auto nodes = c->electionNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.error();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ(nodes->at(0).ephemeralOwner, saved.sessionId);
  const std::string node = "/dugong/c1/election/" + nodes->at(0).node;

  // The successor re-attaches: same session, same node; b sees no change.
  std::optional<SessionCredentials> reported;
  auto o = options(connect(), "c1", 6000);
  o.resume = saved;
  auto again = std::make_unique<Peer>(io, o, "a");
  again->session().setSessionCallback([&](SessionCredentials cr) { reported = cr; });
  again->start();
  ASSERT_TRUE(again->waitInit());
  const auto after = again->session().status();
  EXPECT_TRUE(after.resumed);
  EXPECT_EQ(after.sessionId, saved.sessionId);
  EXPECT_EQ(after.electionNode, node);
  EXPECT_EQ(after.sessionsOpened, 1);
  EXPECT_EQ(again->active(), (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(reported.has_value());
  EXPECT_EQ(reported->sessionId, saved.sessionId);
  runUntil(io, [] { return false; }, std::chrono::milliseconds(500));
  EXPECT_TRUE(other->all<ActivePeersChanged>().empty()) << "b saw the peers change";
  nodes = c->electionNodes();
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(nodes->size(), 2u);
}

TEST_F(SessionRestartTest, ASessionThatCannotBeReattachedIsReplacedByANewOne) {
  SessionCredentials bogus{0x7fffffff12345678, std::string(16, 'x')};
  auto a = startPeer("a", bogus);
  const auto st = a->session().status();
  EXPECT_FALSE(st.resumed);
  EXPECT_NE(st.sessionId, bogus.sessionId);
  EXPECT_EQ(a->active(), (std::vector<std::string>{"a"}));
}

TEST_F(SessionRestartTest, DestroyingASessionEndsItOffTheCallersThread) {
  auto b = startPeer("b");
  auto a = startPeer("a");
  ASSERT_TRUE(runUntil(io, [&] { return b->active().size() == 2; }));
  // The closer's thread waits for this test to let it go: a destructor that closed on
  // this thread would wait for itself (and the hook gives up after 10 s, failing).
  std::promise<void> release;
  auto released = release.get_future().share();
  std::atomic<bool> closedHere{false};
  std::atomic<bool> waitedForRelease{false};
  const auto testThread = std::this_thread::get_id();
  detail::setBeforeCloseHookForTest([&, released] {
    if (std::this_thread::get_id() == testThread) closedHere = true;
    waitedForRelease = released.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  });
  a->destroy();  // returns while the close waits for the release
  release.set_value();
  ASSERT_TRUE(waitForClosedSessions(std::chrono::seconds(20)));
  detail::setBeforeCloseHookForTest(nullptr);
  EXPECT_FALSE(closedHere.load());
  EXPECT_TRUE(waitedForRelease.load());
  // The session did end: b sees a leave at once (not after the timeout).
  EXPECT_TRUE(runUntil(io, [&] { return b->active() == std::vector<std::string>{"b"}; }));
}

// Quorum mode: the takeover report and the streaming flag of a re-attached node stay as
// they are until the new run publishes its own (rewriting the node would withdraw the
// report behind the state machine's back, and change the version its write checks).
TEST_F(SessionRestartTest, AReattachedSessionKeepsTheTakeoverReportItsNodeHolds) {
  zk = ZooKeeperCluster::standalone();  // forks
  TakeoverReport report;
  report.generation = 4;
  report.wal = WalPosition::parse("0/5000060").value();
  report.history.timeline = 2;
  report.instance = 7;
  const SessionCredentials saved =
      runPeerThatDetachesAndExits(connect(), [&](Peer& p, boost::asio::io_context& childIo) {
        p.session().setStreaming(false);
        std::optional<ReportPublished> published;
        p.session().publishReport(report, [&](ReportPublished r) { published = r; });
        return runUntil(childIo, [&] { return published.has_value(); }) && published->ok;
      });
  ASSERT_NE(saved.sessionId, 0);

  auto again = startPeer("a", saved);
  ASSERT_TRUE(again->session().status().resumed);
  const ZkInitialized init = again->all<ZkInitialized>().at(0);
  ASSERT_EQ(init.reports.count("a"), 1u);
  const int32_t version = init.reports.at("a").nodeVersion;
  TakeoverReport seen = init.reports.at("a");
  seen.nodeVersion = -1;
  EXPECT_EQ(seen, report);
  EXPECT_EQ(init.notStreaming, std::set<std::string>{"a"});
  // Published again as it stands: the node is not written, its version is the one read.
  std::optional<ReportPublished> republished;
  again->session().publishReport(report, [&](ReportPublished r) { republished = r; });
  ASSERT_TRUE(runUntil(io, [&] { return republished.has_value(); }));
  EXPECT_TRUE(republished->ok) << republished->error;
  EXPECT_EQ(republished->nodeVersion, version);
}

}  // namespace
}  // namespace dugong::zk
