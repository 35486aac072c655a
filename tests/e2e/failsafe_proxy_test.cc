// The failsafe's answer rewritten on the path between a real primary and its sync (issue
// 41, decision 0069): the primary's agent, with its postgres, runs in a network namespace
// of its own; everything it exchanges with the other peers and ZooKeeper passes through
// relays of this test, and its requests for a promise (POST /failsafe on the sync's
// agent) through an attacker's proxy (tests/e2e/failsafe_proxy.h). Every agent has the
// cluster's peer key. A genuine grant through an honest proxy lets the primary write on
// past its lease while both are cut from ZooKeeper; a forged, changed or replayed answer
// never does: the primary stops writes at its lease's end, as with the failsafe off.
// Skipped without root or `ip netns`.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_harness.h"
#include "tests/e2e/failsafe_proxy.h"
#include "tests/support/net_namespace.h"
#include "tests/support/tcp_proxy.h"
#include "tests/support/tcp_relay.h"

namespace dugong::e2e {
namespace {

using dugong::testing::NetNamespace;
using dugong::testing::TcpProxy;
using dugong::testing::TcpRelay;
using Clock = std::chrono::steady_clock;

// The port of the first server of a ZooKeeper connect string ("host:port,...[/chroot]").
int firstPort(const std::string& connect) {
  auto first = connect.substr(0, connect.find_first_of(",/"));
  return std::stoi(first.substr(first.rfind(':') + 1));
}

// The cluster's key, in a file of its own (0600) removed with the object.
struct PeerKeyFile {
  PeerKeyFile() {
    path = (std::filesystem::temp_directory_path() / ("dugong-peer-key-" + std::to_string(::getpid()))).string();
    std::ofstream(path) << "5f0c1d2e3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9011223344\n";
    ::chmod(path.c_str(), 0600);
  }
  ~PeerKeyFile() { std::filesystem::remove(path); }
  std::string path;
};

// What an agent logged after `offset` (a size of its log taken earlier).
std::string logSince(const E2EPeer& p, std::streamoff offset) {
  std::ifstream in(p.logPath);
  in.seekg(offset);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
std::streamoff logSize(const E2EPeer& p) {
  std::ifstream in(p.logPath, std::ios::ate);
  return in ? static_cast<std::streamoff>(in.tellg()) : 0;
}
bool has(const std::string& text, const std::string& words) { return text.find(words) != std::string::npos; }

class FailsafeAcrossNamespaces : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string whyNot;
    ns_ = NetNamespace::make("dgfs", &whyNot);
    if (!ns_) GTEST_SKIP() << "no network namespace for the primary's agent: " << whyNot;
    HarnessOptions o;
    o.peers = 3;
    o.httpConfig = "  peerKeyFile: " + key_.path + "\n";
    // Peer 0 (the primary) reaches ZooKeeper from its namespace through a link of its
    // own; peer 1 (the sync) through one in the test's; both can be cut.
    o.agentZkConnect = [this](int index, const std::string& connect) {
      const int port = firstPort(connect);
      if (index == 0) {
        zkLinks_.push_back(std::make_unique<TcpProxy>(ns_->listenOnLoopback(0),
                                                      [port] { return dugong::testing::connectToLoopback(port); }));
      } else {
        zkLinks_.push_back(std::make_unique<TcpProxy>("127.0.0.1", port));
      }
      return "127.0.0.1:" + std::to_string(zkLinks_.back()->port());
    };
    o.agentNetns = [this](int index) { return index == 0 ? ns_->fd() : -1; };
    h_ = std::make_unique<Harness>(o);
    // The primary's postgres (the sync streams from it, the test writes to it) and its
    // HTTP port, at the same ports on the test's loopback.
    for (int port : {h_->peer(0).pg->port, h_->peer(0).httpPort}) {
      mirrors_.push_back(std::make_unique<TcpRelay>(dugong::testing::listenOnLoopback(port),
                                                    [this, port] { return ns_->connectToLoopback(port); }));
    }
    // The sync's HTTP port, as the primary's agent sees it: through the attacker.
    const int syncHttp = h_->peer(1).httpPort;
    proxy_ = std::make_unique<FailsafeProxy>(ns_->listenOnLoopback(syncHttp),
                                             [syncHttp] { return dugong::testing::connectToLoopback(syncHttp); });
  }
  void TearDown() override {
    if (h_ && HasFailure()) std::cerr << h_->describe() << h_->logTail(0, 80) << h_->logTail(1, 40);
    // The agents and postgres first, then the relays, then the namespace.
    h_.reset();
    proxy_.reset();
    mirrors_.clear();
    zkLinks_.clear();
    ns_.reset();
  }

  // Peer 0 first, so that it sets the cluster up as its primary; peer 1 second, its sync.
  void startCluster() {
    Harness& h = *h_;
    for (int i = 0; i < 3; ++i) {
      h.startAgent(i);
      ASSERT_TRUE(h.waitFor([&] { return h.status(i).has_value(); }, std::chrono::seconds(60)))
          << "agent " << i << " does not answer";
      std::this_thread::sleep_for(std::chrono::seconds(1));  // in session order
    }
    ASSERT_EQ(h.waitForHealthyCluster(2, std::chrono::seconds(180)), 0) << "peer 0 did not become the primary";
    ASSERT_EQ(h.indexWithRole("sync"), 1);
    waitUntilSteady();
  }
  bool writable(int i) { return h_->httpStatus(i, "/primary") == 200; }
  // Peer 0 a writable primary connected to ZooKeeper with no transition in flight (it
  // can ask for a promise), peer 1 its sync, streaming.
  bool steady() {
    const auto primary = h_->status(0), sync = h_->status(1);
    if (!primary || !sync || h_->indexWithRole("sync") != 1) return false;
    const auto& health = (*primary)["health"];
    return health.value("writablePrimary", false) && !health.value("transitionInFlight", true) &&
           (*primary)["zookeeper"].value("connected", false) && (*sync)["health"].value("streamingReplica", false);
  }
  // Steady for a second on end (each cut starts from a cluster that has settled).
  void waitUntilSteady() {
    int polls = 0;
    ASSERT_TRUE(h_->waitFor([&] { return (polls = steady() ? polls + 1 : 0) >= 10; }, std::chrono::seconds(90)))
        << "the cluster did not settle with peer 0 the primary and peer 1 its sync";
  }
  // ZooKeeper back for both: new sessions, the primary confirms the state and writes.
  void healAndRecover() {
    zkLinks_[0]->heal();
    zkLinks_[1]->heal();
    waitUntilSteady();
  }
  // Both cut from ZooKeeper (the sync then promises), the answers rewritten by
  // `forgery`: the primary stops writes at its lease's end, believing no grant.
  void forgedAnswersExtendNothing(FailsafeForgery forgery) {
    SCOPED_TRACE(forgeryName(forgery));
    proxy_->forge(forgery);
    const auto offset = logSize(h_->peer(0));
    zkLinks_[0]->cut();
    zkLinks_[1]->cut();
    const auto cutAt = Clock::now();
    EXPECT_TRUE(h_->waitFor([&] { return !writable(0); }, std::chrono::seconds(30)))
        << "the primary writes on, cut from ZooKeeper, under " << forgeryName(forgery) << " answers";
    const auto stopped = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - cutAt);
    const std::string log = logSince(h_->peer(0), offset);
    EXPECT_GT(proxy_->requests(), 0) << "the primary asked nothing through the proxy";
    EXPECT_TRUE(has(log, "gave no promise, no answer")) << log;
    EXPECT_FALSE(has(log, "promised not to take over")) << "a rewritten answer was believed:\n" << log;
    EXPECT_TRUE(has(log, "stopping writes now")) << log;
    std::cout << "failsafe proxy (" << forgeryName(forgery) << "): " << proxy_->requests() << " requests, "
              << proxy_->grantsSent() << " grants sent to the primary; /primary 503 " << stopped.count()
              << " ms after the cut\n";
    healAndRecover();
  }

  PeerKeyFile key_;
  std::unique_ptr<NetNamespace> ns_;
  std::vector<std::unique_ptr<TcpProxy>> zkLinks_;  // by peer index
  std::vector<std::unique_ptr<TcpRelay>> mirrors_;
  std::unique_ptr<FailsafeProxy> proxy_;
  std::unique_ptr<Harness> h_;
};

TEST_F(FailsafeAcrossNamespaces, OnlyAGenuineAnswerExtendsThePrimarysPermission) {
  ASSERT_NO_FATAL_FAILURE(startCluster());
  Harness& h = *h_;

  // Honest: the sync, cut from ZooKeeper too, promises; its grants keep the primary
  // writing past its lease. The fifth is asked four promise-thirds (a session timeout
  // and more) after the first, which came after the last round trip: past the lease.
  proxy_->forge(FailsafeForgery::kNone);
  auto offset = logSize(h.peer(0));
  zkLinks_[0]->cut();
  zkLinks_[1]->cut();
  const auto cutAt = Clock::now();
  ASSERT_TRUE(h.waitFor([&] { return proxy_->grantsSent() >= 5; }, std::chrono::seconds(30)))
      << proxy_->requests() << " requests, " << proxy_->grantsSent() << " grants";
  EXPECT_TRUE(writable(0)) << "the primary stopped writes under a genuine promise";
  std::cout << "failsafe proxy (honest): " << proxy_->grantsSent() << " grants; /primary still 200 "
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - cutAt).count()
            << " ms after the cut\n";
  std::string log = logSince(h.peer(0), offset);
  EXPECT_TRUE(has(log, "peer2 promised not to take over")) << log;
  EXPECT_FALSE(has(log, "stopping writes now")) << log;
  ASSERT_TRUE(proxy_->holdsAGrant());
  ASSERT_NO_FATAL_FAILURE(healAndRecover());

  ASSERT_NO_FATAL_FAILURE(forgedAnswersExtendNothing(FailsafeForgery::kReplay));
  ASSERT_NO_FATAL_FAILURE(forgedAnswersExtendNothing(FailsafeForgery::kForgedGrant));
  ASSERT_NO_FATAL_FAILURE(forgedAnswersExtendNothing(FailsafeForgery::kRequestDuration));

  // The sync reaches ZooKeeper and refuses; the refusal arrives as a grant. The primary
  // stops at its lease's end, before the sync takes over: never two writable primaries.
  proxy_->forge(FailsafeForgery::kFlipGranted);
  offset = logSize(h.peer(0));
  zkLinks_[0]->cut();
  bool twoWritable = false;
  ASSERT_TRUE(h.waitFor(
      [&] {
        const bool old = writable(0), next = writable(1);
        twoWritable = twoWritable || (old && next);
        return next && !old;
      },
      std::chrono::seconds(60)))
      << "the sync did not take over";
  EXPECT_FALSE(twoWritable) << "the old primary and the new one both answered /primary with 200";
  log = logSince(h.peer(0), offset);
  EXPECT_GT(proxy_->grantsSent(), 0) << "no refusal was turned into a grant";
  EXPECT_TRUE(has(log, "gave no promise, no answer")) << log;
  EXPECT_FALSE(has(log, "promised not to take over")) << "a flipped refusal was believed:\n" << log;
}

}  // namespace
}  // namespace dugong::e2e
