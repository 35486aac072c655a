#include "agent/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace dugong::agent {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

Result<HttpResponse> httpGet(const std::string& url, std::chrono::milliseconds timeout) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) return Error{"unsupported URL \"" + url + "\" (http:// only)"};
  std::string rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  std::string hostPort = rest.substr(0, slash);
  std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
  auto colon = hostPort.rfind(':');
  std::string host = colon == std::string::npos ? hostPort : hostPort.substr(0, colon);
  std::string port = colon == std::string::npos ? "80" : hostPort.substr(colon + 1);
  if (host.empty() || port.empty()) return Error{"bad URL \"" + url + "\""};

  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  HttpResponse out;
  beast::error_code failure;
  std::string stage = "resolving";
  tcp::resolver resolver(io);
  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, hostPort);
  req.set(http::field::user_agent, "dugong");
  beast::flat_buffer buffer;
  http::response<http::string_body> res;

  stream.expires_after(timeout);
  resolver.async_resolve(host, port, [&](beast::error_code ec, tcp::resolver::results_type results) {
    if (ec) return void(failure = ec);
    stage = "connecting to";
    stream.async_connect(results, [&](beast::error_code ec2, const tcp::endpoint&) {
      if (ec2) return void(failure = ec2);
      stage = "requesting";
      http::async_write(stream, req, [&](beast::error_code ec3, size_t) {
        if (ec3) return void(failure = ec3);
        stage = "reading from";
        http::async_read(stream, buffer, res, [&](beast::error_code ec4, size_t) {
          if (ec4) return void(failure = ec4);
          out.status = static_cast<int>(res.result_int());
          out.body = res.body();
        });
      });
    });
  });
  io.run_for(timeout + std::chrono::milliseconds(100));
  if (failure) return Error{stage + " " + url + ": " + failure.message()};
  if (out.status == 0) return Error{"no answer from " + url + " within " + std::to_string(timeout.count()) + " ms"};
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

}  // namespace dugong::agent
