// The failsafe's peer link (HttpPeerLink, agent/daemon_env.h) against a fake sync: a
// real HTTP server in this process answers POST /failsafe as the test says. What the
// link hands the driver is asserted: only an answer the cluster's key vouches for, to
// this very request, can grant a promise (and so extend a primary's permission).
// And a capture on lo with tcpdump: neither the bearer token nor the key crosses the wire.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/daemon_env.h"
#include "agent/failsafe_message.h"
#include "agent/http_api.h"
#include "agent/http_server.h"
#include "tests/support/test_env.h"

namespace dugong::agent {
namespace {

const std::string kClusterKey(64, 'k');
const std::string kToken = "t0ken-that-must-never-travel-in-clear";

AgentConfig requesterConfig(std::optional<std::string> key) {
  AgentConfig c;
  c.zk.cluster = "c1";
  c.identity.id = "p1";
  c.httpSecret = kToken;
  if (key) c.peerKey = PeerKey(*key);
  return c;
}

// The sync's agent, played by the test: `answer` makes the reply to each request (the
// request as received, and the call parsed from it).
class FakeSync {
 public:
  using Answer = std::function<HttpReply(const HttpRequest&, const FailsafeCall&)>;
  explicit FakeSync(Answer answer) : work_(io_.get_executor()) {
    server_ = std::make_unique<HttpServer>(io_, [this, answer](const HttpRequest& r, HttpServer::Respond respond) {
      requests_.push_back(r);
      auto call = parseFailsafeBody(r.body);
      if (!call) return respond(jsonError(400, call.error()));
      respond(answer(r, *call));
    });
    listened_ = server_->listen("127.0.0.1", 0);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FakeSync() {
    work_.reset();
    io_.stop();
    thread_.join();
  }
  PeerIdentity identity() const {
    PeerIdentity s{"s1", "127.0.0.1", "tcp://postgres@127.0.0.1:5432/postgres", "z", std::nullopt};
    s.backupUrl = "http://127.0.0.1:" + std::to_string(server_->port());
    return s;
  }
  int port() const { return server_->port(); }
  bool listening() const { return listened_.ok(); }
  // Read once the link has its answer (the server answered them all by then).
  const std::vector<HttpRequest>& requests() const { return requests_; }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::unique_ptr<HttpServer> server_;
  Result<bool> listened_ = true;
  std::vector<HttpRequest> requests_;
  std::thread thread_;
};

// What the link hands the driver for one request of p1's to the fake sync.
Result<driver::FailsafeAnswer> ask(const AgentConfig& config, const FakeSync& sync) {
  boost::asio::io_context io;
  HttpPeerLink link(io, config);
  std::optional<Result<driver::FailsafeAnswer>> out;
  link.askFailsafe(sync.identity(), driver::FailsafeRequest{7, "p1", 9000}, 3000,
                   [&out](Result<driver::FailsafeAnswer> r) { out = std::move(r); });
  io.run();
  if (!out) return Error{"the link never answered"};
  return *out;
}

// An honest sync holding `key`: grants, signed for the request it received.
FakeSync::Answer honest(const std::string& key) {
  return [key](const HttpRequest&, const FailsafeCall& call) {
    return failsafeReply(call, driver::FailsafeAnswer{true, "promised"}, PeerKey(key));
  };
}

TEST(PeerLink, AGrantSignedForThisRequestUnderTheClusterKeyIsBelieved) {
  FakeSync sync(honest(kClusterKey));
  ASSERT_TRUE(sync.listening());
  auto r = ask(requesterConfig(kClusterKey), sync);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->granted);
  // The request itself: authenticated by the key, and without the bearer token.
  ASSERT_EQ(sync.requests().size(), 1u);
  EXPECT_EQ(sync.requests()[0].authorization, "");
  auto call = parseFailsafeBody(sync.requests()[0].body);
  ASSERT_TRUE(call.ok()) << call.error();
  EXPECT_EQ(call->granter, "s1");
  EXPECT_TRUE(acceptFailsafeCall(*call, "c1", "s1", PeerKey(kClusterKey)).ok());
}

TEST(PeerLink, AForgedGrantIsNeverBelieved) {
  FakeSync sync([](const HttpRequest&, const FailsafeCall& call) {
    nlohmann::json j = {{"granted", true}, {"reason", "forged"}, {"nonce", call.nonce}, {"mac", std::string(64, '0')}};
    return HttpReply{200, "application/json", j.dump()};
  });
  auto r = ask(requesterConfig(kClusterKey), sync);
  ASSERT_FALSE(r.ok() && r->granted) << "a forged grant was believed";
  EXPECT_NE(r.error().find("does not match"), std::string::npos) << r.error();
}

TEST(PeerLink, AGrantWithoutAMacIsNeverBelieved) {
  FakeSync sync([](const HttpRequest&, const FailsafeCall&) {
    return HttpReply{200, "application/json", R"({"granted": true, "reason": "no mac"})"};
  });
  auto r = ask(requesterConfig(kClusterKey), sync);
  ASSERT_FALSE(r.ok() && r->granted) << "a grant without a MAC was believed";
  EXPECT_NE(r.error().find("no MAC"), std::string::npos) << r.error();
}

TEST(PeerLink, AGrantUnderAnotherKeyIsNeverBelieved) {
  FakeSync sync(honest(std::string(64, 'x')));
  auto r = ask(requesterConfig(kClusterKey), sync);
  ASSERT_FALSE(r.ok() && r->granted) << "a grant under another key was believed";
  EXPECT_NE(r.error().find("does not match"), std::string::npos) << r.error();
}

// The sync's genuine grant to a first request, recorded on the way and played back as
// the answer to the next: its nonce is the first request's.
TEST(PeerLink, AReplayedGrantIsNeverBelieved) {
  std::optional<HttpReply> recorded;
  FakeSync sync([&recorded](const HttpRequest&, const FailsafeCall& call) {
    if (!recorded) recorded = failsafeReply(call, driver::FailsafeAnswer{true, "promised"}, PeerKey(kClusterKey));
    return *recorded;
  });
  auto first = ask(requesterConfig(kClusterKey), sync);
  ASSERT_TRUE(first.ok() && first->granted) << (first.ok() ? first->reason : first.error());
  auto replayed = ask(requesterConfig(kClusterKey), sync);
  ASSERT_FALSE(replayed.ok() && replayed->granted) << "a replayed grant was believed";
  EXPECT_NE(replayed.error().find("replay"), std::string::npos) << replayed.error();
}

// Without a key on either side (every agent on one host), the messages go as they are.
TEST(PeerLink, WithoutAKeyTheAnswerIsTakenAsItComes) {
  FakeSync sync([](const HttpRequest&, const FailsafeCall& call) {
    return failsafeReply(call, driver::FailsafeAnswer{true, "promised"}, std::nullopt);
  });
  auto r = ask(requesterConfig(std::nullopt), sync);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->granted);
  ASSERT_EQ(sync.requests().size(), 1u);
  EXPECT_EQ(sync.requests()[0].authorization, "");
}

std::string fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// tcpdump on lo during a failsafe request from an agent whose configuration holds a
// bearer token: the capture holds the request (its path and nonce) but neither the token
// nor the key. Needs root and tcpdump (apt-get install tcpdump); skipped otherwise.
TEST(PeerLinkCapture, NeitherTheTokenNorTheKeyCrossesTheWire) {
  if (::geteuid() != 0) GTEST_SKIP() << "capturing on lo needs root";
  if (dugong::testing::commandOutput("command -v tcpdump").empty()) {
    GTEST_SKIP() << "tcpdump is not installed (apt-get install tcpdump)";
  }
  dugong::testing::ScratchDir dir("dugong-capture");
  FakeSync sync(honest(kClusterKey));
  const std::string pcap = dir.path() + "/lo.pcap";
  const std::string log = dir.path() + "/tcpdump.log";
  // --immediate-mode -U: each packet written as it comes; -s 0: whole packets; its messages to `log`.
  const std::string filter = "tcp port " + std::to_string(sync.port());
  std::vector<std::string> args = {"tcpdump", "-i", "lo", "--immediate-mode", "-U", "-s", "0", "-w", pcap, filter};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t tcpdump = -1;
  const int spawned = ::posix_spawnp(&tcpdump, "tcpdump", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ASSERT_EQ(spawned, 0) << "cannot start tcpdump";
  // Capturing once it says so.
  for (int i = 0; i < 1000 && fileBytes(log).find("listening on") == std::string::npos; ++i) {
    int status = 0;
    if (::waitpid(tcpdump, &status, WNOHANG) == tcpdump) FAIL() << "tcpdump ended: " << fileBytes(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(fileBytes(log).find("listening on"), std::string::npos) << fileBytes(log);
  auto r = ask(requesterConfig(kClusterKey), sync);
  // Stopped once the answer is in the file (its packets come after the request's).
  for (int i = 0; i < 1000 && fileBytes(pcap).find("promised") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(tcpdump, SIGTERM);
  int status = 0;
  ::waitpid(tcpdump, &status, 0);
  ASSERT_TRUE(r.ok() && r->granted) << (r.ok() ? r->reason : r.error());

  const std::string captured = fileBytes(pcap);
  ASSERT_EQ(sync.requests().size(), 1u);
  const auto call = parseFailsafeBody(sync.requests()[0].body);
  ASSERT_TRUE(call.ok());
  // The capture saw the request: its path and its nonce are there.
  EXPECT_NE(captured.find("POST /failsafe"), std::string::npos) << fileBytes(log);
  EXPECT_NE(captured.find(call->nonce), std::string::npos);
  EXPECT_EQ(captured.find(kToken), std::string::npos) << "the bearer token crossed the wire in clear";
  EXPECT_EQ(captured.find(kClusterKey), std::string::npos) << "the peer key crossed the wire";
  EXPECT_EQ(captured.find("Authorization"), std::string::npos);
}

}  // namespace
}  // namespace dugong::agent
