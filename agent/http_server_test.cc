// The HTTP server with real clients: curl over HTTPS with a certificate made by
// Debian's openssl for the test, and the request fields the API needs (method, query,
// body, Authorization).
#include "agent/http_server.h"
#include "ops/http_client.h"

#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/test_env.h"

namespace dugong::agent {
namespace {

using dugong::testing::commandOutput;

// A server on its own io_context thread that echoes each request as JSON.
class EchoServer {
 public:
  explicit EchoServer(const HttpTls& tls) : work_(io_.get_executor()) {
    server_ = std::make_unique<HttpServer>(io_, [](const HttpRequest& r, HttpServer::Respond respond) {
      nlohmann::json j = {{"method", r.method}, {"path", r.path},       {"query", r.query},
                          {"body", r.body},     {"authorization", r.authorization}};
      respond({200, "application/json", j.dump()});
    });
    listened_ = server_->listen("127.0.0.1", 0, tls);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~EchoServer() {
    work_.reset();
    io_.stop();
    thread_.join();
  }
  const Result<bool>& listened() const { return listened_; }
  int port() const { return server_->port(); }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::unique_ptr<HttpServer> server_;
  Result<bool> listened_ = true;
  std::thread thread_;
};

TEST(HttpServer, ServesHttpsWithATestMadeCertificateAndPassesTheRequestThrough) {
  dugong::testing::ScratchDir dir("dugong-https");
  const auto [cert, key] = dugong::testing::makeSelfSignedCertificate(dir.path(), "IP:127.0.0.1");
  EchoServer server(HttpTls{cert, key});
  ASSERT_TRUE(server.listened().ok()) << server.listened().error();
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
  auto out = commandOutput("curl -sS --max-time 10 --cacert " + cert + " -X POST -H 'Authorization: Bearer t' -d '{\"a\":1}' '" +
                 url + "/switchover?x=1&lag=16MB'");
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["method"], "POST");
  EXPECT_EQ(j["path"], "/switchover");
  EXPECT_EQ(j["query"], "x=1&lag=16MB");
  EXPECT_EQ(j["body"], "{\"a\":1}");
  EXPECT_EQ(j["authorization"], "Bearer t");
  // Plain HTTP to the TLS port gets no answer.
  EXPECT_EQ(commandOutput("curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:" +
                std::to_string(server.port()) + "/ping"),
            "000");
}

TEST(HttpServer, TheClientVerifiesTheCertificateAgainstTheCaFileItIsGiven) {
  dugong::testing::ScratchDir dir("dugong-https");
  const auto [cert, key] = dugong::testing::makeSelfSignedCertificate(dir.path(), "DNS:localhost");
  EchoServer server(HttpTls{cert, key});
  ASSERT_TRUE(server.listened().ok()) << server.listened().error();
  const std::string url = "https://localhost:" + std::to_string(server.port()) + "/state";
  auto untrusted = httpGet(url);
  ASSERT_FALSE(untrusted.ok());
  EXPECT_NE(untrusted.error().find("certificate verify failed"), std::string::npos) << untrusted.error();
  setHttpsCaFile(cert);
  auto trusted = httpGet(url);
  setHttpsCaFile("");
  ASSERT_TRUE(trusted.ok()) << trusted.error();
  EXPECT_EQ(trusted->status, 200);
  EXPECT_EQ(nlohmann::json::parse(trusted->body)["path"], "/state");
}

TEST(HttpServer, BadCertificateIsAnErrorAtListenAndBodiesAreBounded) {
  dugong::testing::ScratchDir dir("dugong-https");
  EchoServer bad(HttpTls{dir.path() + "/missing.pem", dir.path() + "/missing.key"});
  ASSERT_FALSE(bad.listened().ok());
  EXPECT_NE(bad.listened().error().find("http.certFile: cannot load"), std::string::npos) << bad.listened().error();

  EchoServer plain(HttpTls{});
  ASSERT_TRUE(plain.listened().ok()) << plain.listened().error();
  const std::string big = dir.path() + "/big";
  commandOutput("head -c 100000 /dev/zero | tr '\\0' x > " + big);
  EXPECT_EQ(commandOutput("curl -s -o /dev/null -w '%{http_code}' --max-time 10 --data-binary @" + big +
                " http://127.0.0.1:" + std::to_string(plain.port()) + "/switchover"),
            "413");
}

}  // namespace
}  // namespace dugong::agent

namespace dugong::agent {
namespace {

// httpPost and httpPostAsync carry the body and the credential, and bound a silent
// server by the timeout.
TEST(HttpClient, PostsTheBodyAndTheCredentialBlockingOrOnALoop) {
  EchoServer server(HttpTls{});
  ASSERT_TRUE(server.listened().ok()) << server.listened().error();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/failsafe";
  auto r = httpPost(url, R"({"a":1})", "Bearer t");
  ASSERT_TRUE(r.ok()) << r.error();
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["method"], "POST");
  EXPECT_EQ(j["path"], "/failsafe");
  EXPECT_EQ(j["body"], R"({"a":1})");
  EXPECT_EQ(j["authorization"], "Bearer t");

  boost::asio::io_context io;
  std::optional<Result<HttpResponse>> async;
  httpPostAsync(io, url, R"({"b":2})", "", std::chrono::seconds(3), [&](Result<HttpResponse> a) { async = std::move(a); });
  EXPECT_FALSE(async) << "answered inside the call";
  io.run();
  ASSERT_TRUE(async && async->ok()) << (async ? async->error() : "no answer");
  EXPECT_EQ(nlohmann::json::parse((*async)->body)["body"], R"({"b":2})");

  // A listener that never answers: the timeout ends the request with an error.
  boost::asio::io_context silentIo;
  boost::asio::ip::tcp::acceptor silent(silentIo, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const std::string silentUrl = "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/failsafe";
  auto late = httpPost(silentUrl, "{}", "", std::chrono::milliseconds(300));
  EXPECT_FALSE(late.ok());
}

}  // namespace
}  // namespace dugong::agent
