// A small blocking HTTP GET, for tools (dugong-adm) and tests that read the agents'
// status endpoints. Bounded by `timeout` from connect to the end of the body.
#pragma once

#include <chrono>
#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// `url` is "http://host:port/path". Errors: bad URL, connection refused, timeout.
Result<HttpResponse> httpGet(const std::string& url, std::chrono::milliseconds timeout = std::chrono::seconds(3));

}  // namespace dugong::agent
