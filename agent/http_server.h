// The agent's read-only HTTP status server (Boost.Beast), on the agent's io_context.
// Every request gets one response and the connection is closed. Bounded: 5 s to read a
// request, 8 KiB of headers, no body, at most 64 connections at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "statemachine/result.h"

namespace dugong::agent {

struct HttpReply {
  int status = 200;
  std::string contentType = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  // Called on the io_context for each GET/HEAD, with the path without the query.
  using Handler = std::function<HttpReply(const std::string& path)>;

  HttpServer(boost::asio::io_context& io, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting; an error (address in use, bad address) is returned.
  Result<bool> listen(const std::string& host, int port);
  // The bound port (useful with port 0).
  int port() const;
  void stop();

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace dugong::agent
