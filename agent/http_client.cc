#include "agent/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
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

// One GET over a connected `stream` (plain or TLS after its handshake).
template <class Stream>
void exchange(Stream& stream, const std::string& target, const std::string& hostPort, std::string& stage,
              beast::error_code& failure, HttpResponse& out, beast::flat_buffer& buffer,
              http::response<http::string_body>& res) {
  auto req = std::make_shared<http::request<http::empty_body>>(http::verb::get, target, 11);
  req->set(http::field::host, hostPort);
  req->set(http::field::user_agent, "dugong");
  stage = "requesting";
  http::async_write(stream, *req, [&, req](beast::error_code ec, size_t) {
    if (ec) return void(failure = ec);
    stage = "reading from";
    http::async_read(stream, buffer, res, [&](beast::error_code ec2, size_t) {
      if (ec2) return void(failure = ec2);
      out.status = static_cast<int>(res.result_int());
      out.body = res.body();
    });
  });
}

}  // namespace

void setHttpsCaFile(const std::string& path) { caFile() = path; }

Result<HttpResponse> httpGet(const std::string& url, std::chrono::milliseconds timeout) {
  const bool tls = url.rfind("https://", 0) == 0;
  if (!tls && url.rfind("http://", 0) != 0) return Error{"unsupported URL \"" + url + "\" (http:// or https://)"};
  std::string rest = url.substr(tls ? 8 : 7);
  auto slash = rest.find('/');
  std::string hostPort = rest.substr(0, slash);
  std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
  auto colon = hostPort.rfind(':');
  std::string host = colon == std::string::npos ? hostPort : hostPort.substr(0, colon);
  std::string port = colon == std::string::npos ? (tls ? "443" : "80") : hostPort.substr(colon + 1);
  if (host.empty() || port.empty()) return Error{"bad URL \"" + url + "\""};

  boost::asio::io_context io;
  ssl::context ctx(ssl::context::tls_client);
  beast::error_code failure;
  if (tls) {
    ctx.set_default_verify_paths(failure);
    if (!failure && !caFile().empty()) ctx.load_verify_file(caFile(), failure);
    if (failure) return Error{"loading the CAs to trust (" + caFile() + "): " + failure.message()};
    ctx.set_verify_mode(ssl::verify_peer);
  }
  beast::ssl_stream<beast::tcp_stream> stream(io, ctx);
  auto& tcpStream = beast::get_lowest_layer(stream);
  HttpResponse out;
  std::string stage = "resolving";
  tcp::resolver resolver(io);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;

  tcpStream.expires_after(timeout);
  resolver.async_resolve(host, port, [&](beast::error_code ec, tcp::resolver::results_type results) {
    if (ec) return void(failure = ec);
    stage = "connecting to";
    tcpStream.async_connect(results, [&](beast::error_code ec2, const tcp::endpoint&) {
      if (ec2) return void(failure = ec2);
      if (!tls) return exchange(tcpStream, target, hostPort, stage, failure, out, buffer, res);
      stage = "TLS handshake with";
      stream.set_verify_callback(ssl::host_name_verification(host));
      stream.async_handshake(ssl::stream_base::client, [&](beast::error_code ec3) {
        if (ec3) return void(failure = ec3);
        exchange(stream, target, hostPort, stage, failure, out, buffer, res);
      });
    });
  });
  io.run_for(timeout + std::chrono::milliseconds(100));
  if (failure) return Error{stage + " " + url + ": " + failure.message()};
  if (out.status == 0) return Error{"no answer from " + url + " within " + std::to_string(timeout.count()) + " ms"};
  beast::error_code ignored;
  tcpStream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

}  // namespace dugong::agent
