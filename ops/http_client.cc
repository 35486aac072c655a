#include "ops/http_client.h"

#include <memory>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace dugong::agent {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

namespace {

std::string& caFile() {
  static std::string path;
  return path;
}

struct Target {
  bool tls = false;
  std::string host, port, hostPort, path;
};

Result<Target> parseUrl(const std::string& url) {
  Target t;
  t.tls = url.rfind("https://", 0) == 0;
  if (!t.tls && url.rfind("http://", 0) != 0) return Error{"unsupported URL \"" + url + "\" (http:// or https://)"};
  std::string rest = url.substr(t.tls ? 8 : 7);
  auto slash = rest.find('/');
  t.hostPort = rest.substr(0, slash);
  t.path = slash == std::string::npos ? "/" : rest.substr(slash);
  auto colon = t.hostPort.rfind(':');
  t.host = colon == std::string::npos ? t.hostPort : t.hostPort.substr(0, colon);
  t.port = colon == std::string::npos ? (t.tls ? "443" : "80") : t.hostPort.substr(colon + 1);
  if (t.host.empty() || t.port.empty()) return Error{"bad URL \"" + url + "\""};
  return t;
}

// One request, from resolving to the end of the body, on an io_context: the call owns
// everything its handlers use (held by shared_from_this), and answers once.
class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(boost::asio::io_context& io, Target target, std::string url, http::verb verb, std::string body,
       std::string authorization, std::chrono::milliseconds timeout, std::function<void(Result<HttpResponse>)> done)
      : io_(io),
        ctx_(ssl::context::tls_client),
        resolver_(io),
        deadline_(io),
        target_(std::move(target)),
        url_(std::move(url)),
        timeout_(timeout),
        done_(std::move(done)) {
    req_ = http::request<http::string_body>(verb, target_.path, 11);
    req_.set(http::field::host, target_.hostPort);
    req_.set(http::field::user_agent, "dugong");
    if (!authorization.empty()) req_.set(http::field::authorization, authorization);
    if (verb == http::verb::post) {
      req_.set(http::field::content_type, "application/json");
      req_.body() = std::move(body);
      req_.prepare_payload();
    }
  }

  void start() {
    if (target_.tls) {
      beast::error_code ec;
      ctx_.set_default_verify_paths(ec);
      if (!ec && !caFile().empty()) ctx_.load_verify_file(caFile(), ec);
      if (ec) {
        return boost::asio::post(io_, [self = shared_from_this(), why = ec.message()] {
          self->finish(Error{"loading the CAs to trust (" + caFile() + "): " + why});
        });
      }
      ctx_.set_verify_mode(ssl::verify_peer);
    }
    // After the context is set up: the stream's TLS session takes its settings then.
    stream_ = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(io_, ctx_);
    beast::get_lowest_layer(*stream_).expires_after(timeout_);
    deadline_.expires_after(timeout_ + std::chrono::milliseconds(100));
    deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec) return;  // cancelled: answered
      self->resolver_.cancel();
      beast::get_lowest_layer(*self->stream_).cancel();
      self->finish(Error{"no answer from " + self->url_ + " within " + std::to_string(self->timeout_.count()) + " ms"});
    });
    resolver_.async_resolve(target_.host, target_.port,
                            [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
                              if (ec) return self->fail("resolving", ec);
                              self->connect(results);
                            });
  }

 private:
  void connect(const tcp::resolver::results_type& results) {
    beast::get_lowest_layer(*stream_).async_connect(results, [self = shared_from_this()](beast::error_code ec,
                                                                                        const tcp::endpoint&) {
      if (ec) return self->fail("connecting to", ec);
      if (!self->target_.tls) return self->exchange(beast::get_lowest_layer(*self->stream_));
      self->stream_->set_verify_callback(ssl::host_name_verification(self->target_.host));
      self->stream_->async_handshake(ssl::stream_base::client, [self](beast::error_code ec2) {
        if (ec2) return self->fail("TLS handshake with", ec2);
        self->exchange(*self->stream_);
      });
    });
  }

  template <class Stream>
  void exchange(Stream& stream) {
    http::async_write(stream, req_, [self = shared_from_this(), &stream](beast::error_code ec, size_t) {
      if (ec) return self->fail("requesting", ec);
      http::async_read(stream, self->buffer_, self->res_, [self](beast::error_code ec2, size_t) {
        if (ec2) return self->fail("reading from", ec2);
        beast::error_code ignored;
        beast::get_lowest_layer(*self->stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
        self->finish(HttpResponse{static_cast<int>(self->res_.result_int()), self->res_.body()});
      });
    });
  }

  void fail(const std::string& stage, const beast::error_code& ec) { finish(Error{stage + " " + url_ + ": " + ec.message()}); }

  void finish(Result<HttpResponse> r) {
    if (!done_) return;
    deadline_.cancel();
    auto done = std::exchange(done_, nullptr);
    done(std::move(r));
  }

  boost::asio::io_context& io_;
  ssl::context ctx_;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> stream_;
  tcp::resolver resolver_;
  boost::asio::steady_timer deadline_;
  Target target_;
  std::string url_;
  std::chrono::milliseconds timeout_;
  std::function<void(Result<HttpResponse>)> done_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  http::response<http::string_body> res_;
};

void request(boost::asio::io_context& io, const std::string& url, http::verb verb, const std::string& body,
             const std::string& authorization, std::chrono::milliseconds timeout,
             std::function<void(Result<HttpResponse>)> done) {
  auto target = parseUrl(url);
  if (!target) {
    return boost::asio::post(io, [done = std::move(done), e = target.error()] { done(Error{e}); });
  }
  std::make_shared<Call>(io, std::move(target).value(), url, verb, body, authorization, timeout, std::move(done))
      ->start();
}

Result<HttpResponse> blocking(const std::string& url, http::verb verb, const std::string& body,
                              const std::string& authorization, std::chrono::milliseconds timeout) {
  boost::asio::io_context io;
  std::optional<Result<HttpResponse>> out;
  request(io, url, verb, body, authorization, timeout, [&out](Result<HttpResponse> r) { out = std::move(r); });
  io.run();
  if (!out) return Error{"no answer from " + url + " within " + std::to_string(timeout.count()) + " ms"};
  return std::move(*out);
}

}  // namespace

void setHttpsCaFile(const std::string& path) { caFile() = path; }

Result<HttpResponse> httpGet(const std::string& url, std::chrono::milliseconds timeout) {
  return blocking(url, http::verb::get, "", "", timeout);
}

Result<HttpResponse> httpPost(const std::string& url, const std::string& body, const std::string& authorization,
                              std::chrono::milliseconds timeout) {
  return blocking(url, http::verb::post, body, authorization, timeout);
}

void httpPostAsync(boost::asio::io_context& io, const std::string& url, const std::string& body,
                   const std::string& authorization, std::chrono::milliseconds timeout,
                   std::function<void(Result<HttpResponse>)> done) {
  request(io, url, http::verb::post, body, authorization, timeout, std::move(done));
}

}  // namespace dugong::agent
