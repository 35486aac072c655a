#include "tests/e2e/failsafe_proxy.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace dugong::e2e {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

constexpr std::chrono::milliseconds kExchangeTimeout{3000};

bool sendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(kExchangeTimeout.count())) <= 0) return false;
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads one HTTP message from `fd` into `parser` (Beast parses), within the timeout.
template <bool isRequest>
bool readMessage(int fd, http::parser<isRequest, http::string_body>& parser) {
  parser.eager(true);
  parser.body_limit(1 << 20);
  const auto until = std::chrono::steady_clock::now() + kExchangeTimeout;
  std::string pending;
  char buf[8192];
  while (!parser.is_done()) {
    if (!pending.empty()) {
      beast::error_code ec;
      const size_t used = parser.put(boost::asio::buffer(pending), ec);
      pending.erase(0, used);
      if (ec && ec != http::error::need_more) return false;
      if (parser.is_done()) break;
      if (used > 0 && !pending.empty()) continue;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return false;
    if (n == 0) {
      beast::error_code ec;
      parser.put_eof(ec);
      return !ec && parser.is_done();
    }
    pending.append(buf, static_cast<size_t>(n));
  }
  return true;
}

template <class Message>
std::string serialized(Message& m) {
  m.prepare_payload();
  std::ostringstream out;
  out << m;
  return out.str();
}

Response status(http::status s, const std::string& body) {
  Response r{s, 11};
  r.set(http::field::content_type, "application/json");
  r.body() = body;
  return r;
}

bool grants(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  return j.is_object() && j.contains("granted") && j["granted"] == true;
}

}  // namespace

const char* forgeryName(FailsafeForgery f) {
  switch (f) {
    case FailsafeForgery::kNone:
      return "honest";
    case FailsafeForgery::kFlipGranted:
      return "flip granted";
    case FailsafeForgery::kRequestDuration:
      return "request duration changed";
    case FailsafeForgery::kRequestGeneration:
      return "request generation changed";
    case FailsafeForgery::kReplay:
      return "replay of an earlier grant";
    case FailsafeForgery::kForgedGrant:
      return "grant forged from the request";
  }
  return "?";
}

FailsafeProxy::FailsafeProxy(int listenFd, std::function<int()> connectUpstream)
    : listenFd_(listenFd), connectUpstream_(std::move(connectUpstream)), thread_([this] { run(); }) {}

FailsafeProxy::~FailsafeProxy() {
  stop_ = true;
  thread_.join();
  ::close(listenFd_);
}

void FailsafeProxy::forge(FailsafeForgery f) {
  forgery_ = f;
  requests_ = 0;
  grantsSent_ = 0;
}

bool FailsafeProxy::holdsAGrant() const {
  std::lock_guard lock(mu_);
  return !recordedGrant_.empty();
}

void FailsafeProxy::run() {
  while (!stop_) {
    pollfd p{listenFd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    serve(client);  // one at a time: a primary asks about once a second
    ::close(client);
  }
}

namespace {
// Sends `request` to the sync on a connection of its own and reads its answer.
std::optional<Response> relay(const std::function<int()>& connectUpstream, Request request) {
  const int fd = connectUpstream();
  if (fd < 0) return std::nullopt;
  std::optional<Response> out;
  http::response_parser<http::string_body> parser;
  if (sendAll(fd, serialized(request)) && readMessage(fd, parser)) out = parser.release();
  ::close(fd);
  return out;
}
}  // namespace

void FailsafeProxy::serve(int client) {
  http::request_parser<http::string_body> parser;
  if (!readMessage(client, parser)) return;
  Request request = parser.release();
  if (request.method() != http::verb::post || request.target() != "/failsafe") {
    if (auto r = relay(connectUpstream_, std::move(request))) sendAll(client, serialized(*r));
    return;
  }
  ++requests_;
  const FailsafeForgery forgery = forgery_;
  auto body = nlohmann::json::parse(request.body(), nullptr, false);
  if (!body.is_object()) body = nlohmann::json::object();
  std::optional<Response> answer;
  switch (forgery) {
    case FailsafeForgery::kRequestDuration:
      // A tenth of what the primary asked: the sync would promise that, the primary time
      // its permission from what it asked.
      body["durationMs"] = std::max<int64_t>(body.value("durationMs", int64_t{0}) / 10, 1);
      request.body() = body.dump();
      answer = relay(connectUpstream_, std::move(request));
      break;
    case FailsafeForgery::kRequestGeneration:
      body["generation"] = body.value("generation", int64_t{0}) + 1;
      request.body() = body.dump();
      answer = relay(connectUpstream_, std::move(request));
      break;
    case FailsafeForgery::kForgedGrant:
      answer = status(http::status::ok, nlohmann::json{{"granted", true},
                                                       {"reason", "promised"},
                                                       {"nonce", body.value("nonce", std::string())},
                                                       {"mac", body.value("mac", std::string())}}
                                            .dump());
      break;
    case FailsafeForgery::kNone:
    case FailsafeForgery::kFlipGranted:
    case FailsafeForgery::kReplay:
      answer = relay(connectUpstream_, std::move(request));
      break;
  }
  if (!answer) return;  // the primary sees no answer
  if (forgery == FailsafeForgery::kNone && answer->result() == http::status::ok && grants(answer->body())) {
    std::lock_guard lock(mu_);
    recordedGrant_ = answer->body();
  }
  if (forgery == FailsafeForgery::kFlipGranted) {
    auto a = nlohmann::json::parse(answer->body(), nullptr, false);
    if (a.is_object() && a.contains("granted") && a["granted"].is_boolean()) {
      a["granted"] = !a["granted"].get<bool>();
      answer->body() = a.dump();
    }
  }
  if (forgery == FailsafeForgery::kReplay) {
    std::lock_guard lock(mu_);
    if (!recordedGrant_.empty()) *answer = status(http::status::ok, recordedGrant_);
  }
  if (answer->result() == http::status::ok && grants(answer->body())) ++grantsSent_;
  sendAll(client, serialized(*answer));
}

}  // namespace dugong::e2e
