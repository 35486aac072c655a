// A small HTTP(S) client: blocking GET and POST for tools (dugong-adm), the agent's
// switchover and tests that read the agents' status endpoints, and an asynchronous
// request on a given io_context for the agent's own loop (the failsafe's POST to its
// sync). Bounded by `timeout` from connect to the end of the body.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "statemachine/result.h"

namespace dugong::agent {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// `url` is "http://host:port/path" or "https://host:port/path". HTTPS verifies the
// server's certificate and host name against the system's CAs and the CA file set by
// setHttpsCaFile. Errors: bad URL, connection refused, certificate not trusted, timeout.
Result<HttpResponse> httpGet(const std::string& url, std::chrono::milliseconds timeout = std::chrono::seconds(3));

// A POST of a JSON `body`, with an Authorization header unless `authorization` is "".
Result<HttpResponse> httpPost(const std::string& url, const std::string& body, const std::string& authorization,
                              std::chrono::milliseconds timeout = std::chrono::seconds(3));

// The same POST on `io` (its thread runs `done`, exactly once, later; never inside the
// call): for a loop that must not block.
void httpPostAsync(boost::asio::io_context& io, const std::string& url, const std::string& body,
                   const std::string& authorization, std::chrono::milliseconds timeout,
                   std::function<void(Result<HttpResponse>)> done);

// The PEM file of the CA(s) that signed the agents' certificates (http.caFile, or
// dugong-adm's --http-ca-file), for every later request of this process; "": the
// system's CAs only. Call it before any thread makes a request.
void setHttpsCaFile(const std::string& path);

}  // namespace dugong::agent
