// A small blocking HTTP(S) GET, for tools (dugong-adm), the agent's switchover and
// tests that read the agents' status endpoints. Bounded by `timeout` from connect to
// the end of the body.
#pragma once

#include <chrono>
#include <string>

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

// The PEM file of the CA(s) that signed the agents' certificates (http.caFile, or
// dugong-adm's --http-ca-file), for every later httpGet of this process; "": the
// system's CAs only. Call it before any thread uses httpGet.
void setHttpsCaFile(const std::string& path);

}  // namespace dugong::agent
