// The agent's HTTP server (Boost.Beast), on the agent's io_context, over TLS (OpenSSL)
// when a certificate is configured. Every request gets one response and the connection
// is closed. Bounded: 5 s to read a request, 8 KiB of headers, 64 KiB of body, at most
// 64 connections at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "statemachine/result.h"

namespace dugong::agent {

struct HttpRequest {
  std::string method;         // "GET", "HEAD", "POST", ...
  std::string path;           // the target without its query
  std::string query;          // after '?', without it; "" when none
  std::string body;
  std::string authorization;  // the Authorization header, "" when none
};

struct HttpReply {
  int status = 200;
  std::string contentType = "text/plain; charset=utf-8";
  std::string body;
};

// HTTPS: the PEM certificate chain and private key files; both empty: plain HTTP.
struct HttpTls {
  std::string certFile;
  std::string keyFile;
  bool enabled() const { return !certFile.empty(); }
};

class HttpServer {
 public:
  // Called on the io_context for each request; `respond` may be called later (once),
  // from any thread.
  using Respond = std::function<void(HttpReply)>;
  using Handler = std::function<void(const HttpRequest& request, Respond respond)>;

  HttpServer(boost::asio::io_context& io, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the certificate (if any), binds and starts accepting; an error (unreadable
  // certificate or key, address in use, bad address) is returned.
  Result<bool> listen(const std::string& host, int port, const HttpTls& tls = {});
  // The bound port (useful with port 0).
  int port() const;
  void stop();

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace dugong::agent
