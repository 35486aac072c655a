// The failsafe's messages between agents (POST /failsafe, driver/failsafe.h), and their
// authentication (docs/security.md "Peer links"). With the cluster's peer key
// (agent/peer_key.h), the request carries an HMAC of its fields and of a nonce fresh
// from the requester; the answer carries an HMAC of the request's fields, the same nonce
// and its decision. The granter believes only a request whose HMAC matches; the
// requester believes only an answer whose HMAC matches its own request: a forged
// answer, an answer to another request (a replay) or one changed on the way is not
// believed. No bearer token travels with either.
//
// Without a key (the agents all on one host: agent/config.h refuses the failsafe across
// hosts without one), the same messages go without an HMAC.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <unordered_set>

#include "ops/http_client.h"
#include "agent/http_server.h"
#include "agent/peer_key.h"
#include "driver/failsafe.h"
#include "statemachine/result.h"

namespace dugong::agent {

struct FailsafeCall {
  std::string cluster;
  driver::FailsafeRequest request;
  std::string granter;  // the peer asked; "" from an agent of an older release
  std::string nonce;    // fresh for each request; "" likewise
  std::string mac;      // of the fields under the peer key; "" when the requester has none
};

// The body of POST /failsafe: with an HMAC when `key` is set.
std::string failsafeBody(const FailsafeCall& call, const std::optional<PeerKey>& key);
// Its parse (the error says why); the HMAC is not checked here.
Result<FailsafeCall> parseFailsafeBody(const std::string& body);

// Whether the granter `selfId` of `cluster` may decide `call`: of its cluster, meant for
// it, and, with a key, with an HMAC that matches. The error says why not.
Result<bool> acceptFailsafeCall(const FailsafeCall& call, const std::string& cluster, const std::string& selfId,
                                const std::optional<PeerKey>& key);

// The nonces of the requests a granter accepted lately: a request seen before is a
// replay (its requester makes a fresh nonce for each, retries included). Bounded: the
// last kRemembered nonces.
class SeenNonces {
 public:
  static constexpr size_t kRemembered = 1024;
  // True the first time `nonce` is shown (and remembers it); false for a replay.
  bool firstSight(const std::string& nonce);

 private:
  std::deque<std::string> order_;
  std::unordered_set<std::string> seen_;
};

// The granter's reply to `call`: 200 {"granted", "reason", "nonce", "mac"}.
HttpReply failsafeReply(const FailsafeCall& call, const driver::FailsafeAnswer& answer, const std::optional<PeerKey>& key);
// The requester's reading of the reply to its request `asked`: with a key, an answer
// without an HMAC, to another nonce, or whose HMAC does not match is an error.
Result<driver::FailsafeAnswer> parseFailsafeReply(const HttpResponse& response, const FailsafeCall& asked,
                                          const std::optional<PeerKey>& key);

}  // namespace dugong::agent
