#include "agent/http_api.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cctype>
#include <charconv>
#include <map>

#include "statemachine/quorum.h"

namespace dugong::agent {
namespace {

const std::string kJson = "application/json";

HttpReply jsonReply(int status, nlohmann::json body) { return {status, kJson, body.dump() + "\n"}; }

// The query's parameters (a=1&b=2); no percent-decoding (no parameter needs it).
std::map<std::string, std::string> queryParameters(const std::string& query) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at <= query.size() && !query.empty()) {
    size_t end = query.find('&', at);
    if (end == std::string::npos) end = query.size();
    const std::string item = query.substr(at, end - at);
    const size_t eq = item.find('=');
    if (!item.empty()) out[item.substr(0, eq)] = eq == std::string::npos ? "" : item.substr(eq + 1);
    at = end + 1;
  }
  return out;
}

// A replica endpoint: `serves` says whether this peer holds the role asked about; the
// tag and the lag cut-off can still take it out of the pool.
HttpReply replicaCheck(const char* what, bool serves, const ApiStatus& s, std::optional<uint64_t> maxLag) {
  nlohmann::json body = {{"role", roleName(s.role)}, {what, false}};
  if (s.replayBacklogBytes) body["lagBytes"] = *s.replayBacklogBytes;
  if (!serves) return jsonReply(503, body);
  if (s.noloadbalance) {
    body["reason"] = "tagged noloadbalance";
    return jsonReply(503, body);
  }
  if (maxLag && (!s.replayBacklogBytes || *s.replayBacklogBytes > *maxLag)) {
    body["reason"] = "lag " + (s.replayBacklogBytes ? std::to_string(*s.replayBacklogBytes) : "unknown") +
                     " bytes is over the cut-off of " + std::to_string(*maxLag);
    return jsonReply(503, body);
  }
  body[what] = true;
  return jsonReply(200, body);
}

// Patroni's body: {"leader": the current primary, checked by the switchover (412 when it
// is not), "candidate": the peer to become primary}; at least one of them (no candidate:
// the sync). Anything else (Patroni's "scheduled_at" included) is refused.
HttpReply switchoverBody(const HttpRequest& r, std::optional<adm::SwitchoverAsk>* ask) {
  const std::string expected = "expected {\"candidate\": \"<peer id>\"} or {\"leader\": \"<primary id>\"}, or both";
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded()) return jsonError(400, "the body is not JSON: " + expected);
  if (!j.is_object() || (!j.contains("candidate") && !j.contains("leader"))) {
    return jsonError(400, expected + ", found " + j.dump());
  }
  adm::SwitchoverAsk out;
  for (const auto& [key, value] : j.items()) {
    if (key == "scheduled_at") {
      return jsonError(400, "\"scheduled_at\" is not supported: schedule the switchover with `dugong-adm switchover "
                            "--scheduled TIME`");
    }
    if (key != "candidate" && key != "leader") {
      return jsonError(400, "unknown key \"" + key + "\" (known: leader, candidate)");
    }
    if (!value.is_string() || value.get<std::string>().empty()) {
      return jsonError(400, "\"" + key + "\" must be a peer id (a non-empty string), found " + value.dump());
    }
    (key == "candidate" ? out.candidate : out.leader) = value.get<std::string>();
  }
  *ask = std::move(out);
  return {};
}

// POST /restart and /reload take no parameters: no body, or an empty JSON object. A
// condition the agent does not know (Patroni's "role", "schedule"...) is refused rather
// than ignored.
HttpReply emptyBody(const HttpRequest& r) {
  if (r.body.find_first_not_of(" \t\r\n") == std::string::npos) return {};
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return jsonError(400, r.path + " takes no body, or {}");
  if (!j.empty()) return jsonError(400, "unknown key \"" + j.begin().key() + "\" (" + r.path + " takes no parameters)");
  return {};
}

Routed mutating(const HttpRequest& r, const ApiAccess& access) {
  if (r.method != "POST") return {jsonError(405, r.path + " needs POST"), std::nullopt};
  if (!access.secret) {
    return {jsonError(403, "the mutating endpoints are disabled: no credential is configured (http.auth.tokenFile)"),
            std::nullopt};
  }
  if (!credentialMatches(r.authorization, *access.secret)) {
    return {jsonError(401, "a credential is required: Authorization: Bearer <token>, or basic authentication "
                           "with the token as the password"),
            std::nullopt};
  }
  if (r.path != "/switchover") {
    HttpReply bad = emptyBody(r);
    if (!bad.body.empty()) return {bad, std::nullopt};
    return {{}, std::nullopt, r.path.substr(1)};
  }
  std::optional<adm::SwitchoverAsk> ask;
  HttpReply bad = switchoverBody(r, &ask);
  if (!ask) return {bad, std::nullopt};
  return {{}, ask};
}

// The body is parsed here; the agent checks its MAC (agent/failsafe_message.h).
Routed failsafe(const HttpRequest& r) {
  if (r.method != "POST") return {jsonError(405, r.path + " needs POST"), std::nullopt};
  auto call = parseFailsafeBody(r.body);
  if (!call) return {jsonError(400, call.error()), std::nullopt};
  Routed out{{}, std::nullopt};
  out.failsafe = std::move(call).value();
  return out;
}

// GET /quorum: the set on its primary (200), or why this peer has none to show (503).
HttpReply quorumReply(const ApiStatus& s) {
  if (!s.quorum || !s.writablePrimary) {
    return jsonReply(503, {{"role", roleName(s.role)}, {"quorumPrimary", false}});
  }
  auto orNull = [](const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json members = nlohmann::json::array();
  for (const ApiQuorumMember& m : s.quorum->members) {
    members.push_back({{"id", m.id},
                       {"streaming", m.state == "streaming"},
                       {"state", orNull(m.state)},
                       {"syncState", orNull(m.syncState)},
                       {"flushLsn", orNull(m.flushLsn)}});
  }
  return jsonReply(200, {{"role", roleName(s.role)},
                         {"quorumPrimary", true},
                         {"mode", "quorum"},
                         {"k", s.quorum->k},
                         {"readQuorum", s.quorum->readQuorum},
                         {"primaryLsn", orNull(s.quorum->primaryLsn)},
                         {"members", members}});
}

}  // namespace

std::optional<ApiQuorum> apiQuorum(Role role, const std::optional<ClusterState>& state, const pg::PgStatus& postgres) {
  if (role != Role::kPrimary || !state || !state->quorum) return std::nullopt;
  ApiQuorum q{state->quorum->k, readQuorum(static_cast<int>(state->quorum->members.size()), state->quorum->k), {},
              postgres.currentLsn};
  for (const PeerIdentity& m : state->quorum->members) {
    ApiQuorumMember member{m.id, std::nullopt, std::nullopt, std::nullopt};
    for (const pg::ReplicationRow& r : postgres.replication) {
      // Several walsenders of one name (one ending): the streaming one.
      if (r.applicationName != m.id || (member.state == "streaming" && r.state != "streaming")) continue;
      member = {m.id, r.state, r.syncState, r.flushLsn};
    }
    q.members.push_back(std::move(member));
  }
  return q;
}

HttpReply jsonError(int status, const std::string& reason) { return jsonReply(status, {{"error", reason}}); }

Result<uint64_t> parseSize(const std::string& text) {
  uint64_t n = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(begin, end, n);
  if (ec != std::errc() || p == begin) {
    return Error{"expected a size in bytes or with a unit (16MB, 1GB), found \"" + text + "\""};
  }
  while (p != end && *p == ' ') ++p;
  std::string unit(p, end);
  for (auto& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  static const std::map<std::string, int> kShift = {{"", 0},   {"b", 0},   {"kb", 10}, {"k", 10}, {"mb", 20},
                                                    {"m", 20}, {"gb", 30}, {"g", 30},  {"tb", 40}, {"t", 40}};
  auto it = kShift.find(unit);
  if (it == kShift.end()) return Error{"unknown unit \"" + std::string(p, end) + "\" (B, kB, MB, GB or TB)"};
  if (it->second > 0 && n > (UINT64_MAX >> it->second)) return Error{"size \"" + text + "\" is too large"};
  return n << it->second;
}

bool credentialMatches(const std::string& authorization, const std::string& secret) {
  std::string given;
  if (authorization.rfind("Bearer ", 0) == 0) {
    given = authorization.substr(7);
  } else if (authorization.rfind("Basic ", 0) == 0) {
    const std::string encoded = authorization.substr(6);
    std::string decoded(encoded.size(), '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                                  reinterpret_cast<const unsigned char*>(encoded.data()), static_cast<int>(encoded.size()));
    if (n < 0) return false;
    decoded.resize(static_cast<size_t>(n));
    // EVP_DecodeBlock keeps the padding's zero bytes.
    size_t padding = 0;
    for (auto i = encoded.rbegin(); i != encoded.rend() && *i == '='; ++i) ++padding;
    decoded.resize(decoded.size() - std::min(padding, decoded.size()));
    const size_t colon = decoded.find(':');
    if (colon == std::string::npos) return false;
    given = decoded.substr(colon + 1);
  } else {
    return false;
  }
  return given.size() == secret.size() && CRYPTO_memcmp(given.data(), secret.data(), secret.size()) == 0;
}

Routed route(const HttpRequest& r, const ApiStatus& s, const ApiAccess& access) {
  if (r.path == "/switchover" || r.path == "/restart" || r.path == "/reload") return mutating(r, access);
  if (r.path == "/failsafe") return failsafe(r);
  if (r.method != "GET" && r.method != "HEAD") {
    return {jsonError(405, r.path + " answers GET and HEAD only"), std::nullopt};
  }
  std::optional<uint64_t> maxLag;
  const auto params = queryParameters(r.query);
  if (auto it = params.find("lag"); it != params.end()) {
    auto lag = parseSize(it->second);
    if (!lag) return {jsonError(400, "lag: " + lag.error()), std::nullopt};
    maxLag = *lag;
  }
  const bool replica = s.streamingReplica;
  if (r.path == "/ping") return {{200, "text/plain; charset=utf-8", "ok\n"}, std::nullopt};
  if (r.path == "/liveness") return {jsonReply(200, {{"alive", true}}), std::nullopt};
  if (r.path == "/health") {
    return {jsonReply(s.postgresOnline ? 200 : 503, {{"postgresRunning", s.postgresOnline}, {"role", roleName(s.role)}}),
            std::nullopt};
  }
  if (r.path == "/readiness") {
    const bool ready = s.writablePrimary || replica;
    return {jsonReply(ready ? 200 : 503, {{"ready", ready}, {"role", roleName(s.role)}}), std::nullopt};
  }
  if (r.path == "/primary") {
    return {jsonReply(s.writablePrimary ? 200 : 503, {{"writablePrimary", s.writablePrimary}, {"role", roleName(s.role)}}),
            std::nullopt};
  }
  if (r.path == "/replica") return {replicaCheck("streamingReplica", replica, s, maxLag), std::nullopt};
  if (r.path == "/sync") return {replicaCheck("streamingSync", replica && s.role == Role::kSync, s, maxLag), std::nullopt};
  if (r.path == "/async") {
    return {replicaCheck("streamingAsync", replica && s.role == Role::kAsync, s, maxLag), std::nullopt};
  }
  if (r.path == "/standby-leader" || r.path == "/standby_leader") {
    const bool leader = s.streamingStandbyLeader && s.role == Role::kStandbyLeader;
    return {jsonReply(leader ? 200 : 503, {{"streamingStandbyLeader", leader}, {"role", roleName(s.role)}}),
            std::nullopt};
  }
  if (r.path == "/read-only") {
    if (s.writablePrimary) return {jsonReply(200, {{"readOnly", true}, {"role", roleName(s.role)}}), std::nullopt};
    return {replicaCheck("readOnly", replica, s, maxLag), std::nullopt};
  }
  if (r.path == "/quorum") return {quorumReply(s), std::nullopt};
  if (r.path == "/state") return {{200, kJson, s.state().dump(2) + "\n"}, std::nullopt};
  if (r.path == "/metrics") return {{200, "text/plain; version=0.0.4; charset=utf-8", s.metrics()}, std::nullopt};
  return {jsonError(404, "not found: try /ping, /liveness, /health, /readiness, /primary, /replica, /read-only, /sync, "
                         "/async, /quorum, /standby-leader, /state, /metrics, POST /switchover, POST /restart, POST /reload, POST /failsafe"),
          std::nullopt};
}

}  // namespace dugong::agent
