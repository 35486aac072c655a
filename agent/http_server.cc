#include "agent/http_server.h"

#include <fcntl.h>

#include <chrono>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace dugong::agent {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {
constexpr int kMaxConnections = 64;
constexpr auto kReadTimeout = std::chrono::seconds(5);
}  // namespace

class HttpServer::Impl : public std::enable_shared_from_this<HttpServer::Impl> {
 public:
  Impl(boost::asio::io_context& io, Handler handler) : io_(io), acceptor_(io), handler_(std::move(handler)) {}

  Result<bool> listen(const std::string& host, int port) {
    boost::system::error_code ec;
    auto addr = boost::asio::ip::make_address(host, ec);
    if (ec) return Error{"http: invalid listen address \"" + host + "\": " + ec.message()};
    tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(boost::asio::socket_base::reuse_address(true), ec);
    if (!ec) ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Error{"http: cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message()};
    }
    doAccept();
    return true;
  }

  int port() const {
    boost::system::error_code ec;
    auto ep = acceptor_.local_endpoint(ec);
    return ec ? 0 : ep.port();
  }

  void stop() {
    boost::system::error_code ec;
    acceptor_.close(ec);
  }

  void doAccept() {
    acceptor_.async_accept(boost::asio::make_strand(io_), [self = shared_from_this()](beast::error_code ec,
                                                                                      tcp::socket socket) {
      if (ec == boost::asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (!ec) {
        if (self->connections_ < kMaxConnections) {
          serve(self, std::move(socket));
        } else {
          beast::error_code ignored;
          socket.close(ignored);
        }
      }
      self->doAccept();
    });
  }

 private:
  struct Connection {
    explicit Connection(tcp::socket s) : stream(std::move(s)) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request_parser<http::empty_body> parser;
    http::response<http::string_body> response;
  };

  static void serve(const std::shared_ptr<Impl>& self, tcp::socket socket) {
    auto c = std::make_shared<Connection>(std::move(socket));
    ++self->connections_;
    c->parser.header_limit(8 * 1024);
    c->parser.body_limit(0);
    c->stream.expires_after(kReadTimeout);
    http::async_read(c->stream, c->buffer, c->parser, [self, c](beast::error_code ec, size_t) {
      if (ec) return done(self, c);
      const auto& req = c->parser.get();
      // The handler reads agent state: run it on the agent's thread.
      boost::asio::post(self->io_, [self, c, method = req.method(), target = std::string(req.target()),
                                    version = req.version()] {
        HttpReply reply;
        if (method != http::verb::get && method != http::verb::head) {
          reply = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
        } else {
          reply = self->handler_(target.substr(0, target.find('?')));
        }
        auto& res = c->response;
        res.version(version);
        res.result(static_cast<http::status>(reply.status));
        res.set(http::field::server, "dugong");
        res.set(http::field::content_type, reply.contentType);
        res.set(http::field::cache_control, "no-store");
        res.keep_alive(false);
        res.body() = method == http::verb::head ? std::string() : std::move(reply.body);
        res.prepare_payload();
        if (method == http::verb::head) res.content_length(reply.body.size());
        c->stream.expires_after(kReadTimeout);
        http::async_write(c->stream, res, [self, c](beast::error_code, size_t) { done(self, c); });
      });
    });
  }

  static void done(const std::shared_ptr<Impl>& self, const std::shared_ptr<Connection>& c) {
    beast::error_code ignored;
    c->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    c->stream.close();
    boost::asio::post(self->io_, [self] { --self->connections_; });
  }

  boost::asio::io_context& io_;
  tcp::acceptor acceptor_;
  Handler handler_;
  int connections_ = 0;  // touched only on io_ (the agent's thread)
};

HttpServer::HttpServer(boost::asio::io_context& io, Handler handler)
    : impl_(std::make_shared<Impl>(io, std::move(handler))) {}
HttpServer::~HttpServer() { impl_->stop(); }
Result<bool> HttpServer::listen(const std::string& host, int port) { return impl_->listen(host, port); }
int HttpServer::port() const { return impl_->port(); }
void HttpServer::stop() { impl_->stop(); }

}  // namespace dugong::agent
