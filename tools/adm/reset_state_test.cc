// dugong-adm reset-state against a real ZooKeeper and a fake agent (a real HTTP server in
// this process), run as a process as an operator would: refused while an agent the state
// names answers (it may be a primary writing on under its sync's promise, with no
// election node), and done only after the wait for the longest promise, announced.
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "agent/http_server.h"
#include "tests/support/test_env.h"
#include "ops/test_views.h"
#include "zk/client.h"
#include "zk/testing/zookeeper_server.h"

namespace dugong::adm {
namespace {

struct Run {
  int code = -1;
  std::string out;  // stdout and stderr
};

// dugong-adm run by the shell, its exit status on the last line.
Run adm(const std::string& args) {
  std::string out = dugong::testing::commandOutput(std::string(DUGONG_ADM_BINARY) + " " + args +
                                                   " </dev/null 2>&1; echo \"exit $?\"");
  Run r;
  const size_t last = out.rfind("exit ");
  if (last == std::string::npos) return r;
  r.code = std::stoi(out.substr(last + 5));
  r.out = out.substr(0, last);
  return r;
}

// An agent that answers /state (its loop on a thread of its own).
class FakeAgent {
 public:
  FakeAgent() : work_(io_.get_executor()) {
    server_ = std::make_unique<agent::HttpServer>(io_, [](const agent::HttpRequest&, agent::HttpServer::Respond respond) {
      respond({200, "application/json", R"({"peer": {"role": "primary"}})"});
    });
    listened_ = server_->listen("127.0.0.1", 0);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FakeAgent() {
    work_.reset();
    io_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  bool listening() const { return listened_.ok(); }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::unique_ptr<agent::HttpServer> server_;
  Result<bool> listened_ = true;
  std::thread thread_;
};

class ResetStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    zk_ = dugong::testing::ZooKeeperCluster::standalone();
    zk::ZkOptions o;
    o.connectString = zk_->connectString();
    o.cluster = "rs";
    auto c = zk::Client::connect(o);
    ASSERT_TRUE(c.ok()) << c.error();
    client_ = std::move(c).value();
    ASSERT_TRUE(client_->ensureLayout().ok());
  }
  // A state whose primary's agent is at `primaryUrl`; the others answer nowhere.
  void writeState(const std::string& primaryUrl) {
    ClusterState s = testing::threePeers();
    s.primary.backupUrl = primaryUrl;
    s.sync->backupUrl = "http://127.0.0.1:1";
    s.async[0].backupUrl = "http://127.0.0.1:1";
    auto w = client_->putState(s, -1, "test");
    ASSERT_TRUE(w.ok) << w.error;
  }
  std::string common() const { return "-z " + zk_->connectString() + " -c rs"; }
  bool stateExists() {
    auto st = client_->readState();
    return st.ok() && st->exists;
  }

  dugong::testing::ScratchDir dir_{"dugong-reset-state"};
  std::unique_ptr<dugong::testing::ZooKeeperCluster> zk_;
  std::unique_ptr<zk::Client> client_;
};

TEST_F(ResetStateTest, RefusedWhileAnAgentTheStateNamesAnswers) {
  FakeAgent primary;
  ASSERT_TRUE(primary.listening());
  writeState(primary.url());
  auto r = adm(common() + " reset-state --yes --promise-wait-ms 0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("refused, nothing removed: the agents of a answer over HTTP though they have no election node"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(stateExists());
}

TEST_F(ResetStateTest, WaitsForTheLongestPromiseBeforeRemoving) {
  writeState("http://127.0.0.1:1");
  const std::string record = dir_.path() + "/removed.json";
  auto r = adm(common() + " reset-state --yes --promise-wait-ms 1500 --record " + record);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("no agent of cluster rs runs; waiting 1500 ms before removing the state: a primary cut off "
                       "from ZooKeeper may write on under its sync's promise for up to 60000 ms"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(stateExists());
}

}  // namespace
}  // namespace dugong::adm
