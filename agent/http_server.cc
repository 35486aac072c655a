#include "agent/http_server.h"

#include <fcntl.h>

#include <chrono>
#include <optional>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace dugong::agent {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

namespace {
constexpr int kMaxConnections = 64;
constexpr auto kReadTimeout = std::chrono::seconds(5);
constexpr size_t kHeaderLimit = 8 * 1024;
constexpr size_t kBodyLimit = 64 * 1024;
}  // namespace

class HttpServer::Impl : public std::enable_shared_from_this<HttpServer::Impl> {
 public:
  Impl(boost::asio::io_context& io, Handler handler) : io_(io), acceptor_(io), handler_(std::move(handler)) {}

  Result<bool> listen(const std::string& host, int port, const HttpTls& tls) {
    if (tls.enabled()) {
      if (auto ok = loadCertificate(tls); !ok) return ok;
    }
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

 private:
  template <class Stream>
  struct Connection {
    template <class... Args>
    explicit Connection(Args&&... args) : stream(std::forward<Args>(args)...) {}
    Stream stream;
    beast::flat_buffer buffer;
    http::request_parser<http::string_body> parser;
    http::response<http::string_body> response;
  };
  using Plain = Connection<beast::tcp_stream>;
  using Tls = Connection<beast::ssl_stream<beast::tcp_stream>>;

  Result<bool> loadCertificate(const HttpTls& tls) {
    tls_.emplace(ssl::context::tls_server);
    tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                      ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    boost::system::error_code ec;
    tls_->use_certificate_chain_file(tls.certFile, ec);
    if (ec) return Error{"http.certFile: cannot load the certificate chain " + tls.certFile + ": " + ec.message()};
    tls_->use_private_key_file(tls.keyFile, ssl::context::pem, ec);
    if (ec) return Error{"http.keyFile: cannot load the private key " + tls.keyFile + ": " + ec.message()};
    return true;
  }

  void doAccept() {
    acceptor_.async_accept(boost::asio::make_strand(io_), [self = shared_from_this()](beast::error_code ec,
                                                                                      tcp::socket socket) {
      if (ec == boost::asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (!ec) {
        if (self->connections_ >= kMaxConnections) {
          beast::error_code ignored;
          socket.close(ignored);
        } else if (self->tls_) {
          ++self->connections_;
          auto c = std::make_shared<Tls>(std::move(socket), *self->tls_);
          beast::get_lowest_layer(c->stream).expires_after(kReadTimeout);
          c->stream.async_handshake(ssl::stream_base::server, [self, c](beast::error_code hec) {
            if (hec) return done(self, c);
            read(self, c);
          });
        } else {
          ++self->connections_;
          read(self, std::make_shared<Plain>(std::move(socket)));
        }
      }
      self->doAccept();
    });
  }

  template <class C>
  static void read(const std::shared_ptr<Impl>& self, const std::shared_ptr<C>& c) {
    c->parser.header_limit(kHeaderLimit);
    c->parser.body_limit(kBodyLimit);
    beast::get_lowest_layer(c->stream).expires_after(kReadTimeout);
    http::async_read(c->stream, c->buffer, c->parser, [self, c](beast::error_code ec, size_t) {
      if (ec == http::error::body_limit) {
        return write(self, c, false, 11,
                     {413, "application/json", "{\"error\":\"the request body is larger than 64 KiB\"}\n"});
      }
      if (ec) return done(self, c);
      const auto& req = c->parser.get();
      const std::string target(req.target());
      const auto q = target.find('?');
      HttpRequest request{std::string(req.method_string()), target.substr(0, q),
                          q == std::string::npos ? "" : target.substr(q + 1), req.body(),
                          std::string(req[http::field::authorization])};
      const bool head = req.method() == http::verb::head;
      const unsigned version = req.version();
      // The handler reads agent state: run it on the agent's thread. Its reply may come
      // later, from any thread: it is written on the connection's strand.
      boost::asio::post(self->io_, [self, c, request = std::move(request), head, version] {
        self->handler_(request, [self, c, head, version](HttpReply reply) {
          boost::asio::post(c->stream.get_executor(), [self, c, head, version, reply = std::move(reply)]() mutable {
            write(self, c, head, version, std::move(reply));
          });
        });
      });
    });
  }

  template <class C>
  static void write(const std::shared_ptr<Impl>& self, const std::shared_ptr<C>& c, bool head, unsigned version,
                    HttpReply reply) {
    auto& res = c->response;
    res.version(version);
    res.result(static_cast<http::status>(reply.status));
    res.set(http::field::server, "dugong");
    res.set(http::field::content_type, reply.contentType);
    res.set(http::field::cache_control, "no-store");
    res.keep_alive(false);
    const size_t length = reply.body.size();
    res.body() = head ? std::string() : std::move(reply.body);
    res.prepare_payload();
    if (head) res.content_length(length);
    beast::get_lowest_layer(c->stream).expires_after(kReadTimeout);
    http::async_write(c->stream, res, [self, c](beast::error_code, size_t) { done(self, c); });
  }

  // A lingering close: the reply is followed by a FIN, and what the client still sends
  // (the rest of a body over the limit) is read and dropped until it closes (bounded by
  // the read timeout), so that no reset destroys the reply before the client reads it.
  static void done(const std::shared_ptr<Impl>& self, const std::shared_ptr<Plain>& c) {
    beast::error_code ignored;
    c->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    c->stream.expires_after(kReadTimeout);
    drain(self, c);
  }

  static void drain(const std::shared_ptr<Impl>& self, const std::shared_ptr<Plain>& c) {
    c->buffer.clear();
    c->stream.async_read_some(c->buffer.prepare(4096), [self, c](beast::error_code ec, size_t) {
      if (!ec) return drain(self, c);
      c->stream.close();
      boost::asio::post(self->io_, [self] { --self->connections_; });
    });
  }

  static void done(const std::shared_ptr<Impl>& self, const std::shared_ptr<Tls>& c) {
    beast::get_lowest_layer(c->stream).expires_after(kReadTimeout);
    c->stream.async_shutdown([self, c](beast::error_code) {
      beast::get_lowest_layer(c->stream).close();
      boost::asio::post(self->io_, [self] { --self->connections_; });
    });
  }

  boost::asio::io_context& io_;
  tcp::acceptor acceptor_;
  Handler handler_;
  std::optional<ssl::context> tls_;
  int connections_ = 0;  // touched only on io_ (the agent's thread)
};

HttpServer::HttpServer(boost::asio::io_context& io, Handler handler)
    : impl_(std::make_shared<Impl>(io, std::move(handler))) {}
HttpServer::~HttpServer() { impl_->stop(); }
Result<bool> HttpServer::listen(const std::string& host, int port, const HttpTls& tls) {
  return impl_->listen(host, port, tls);
}
int HttpServer::port() const { return impl_->port(); }
void HttpServer::stop() { impl_->stop(); }

}  // namespace dugong::agent
