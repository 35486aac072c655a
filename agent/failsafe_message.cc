#include "agent/failsafe_message.h"

#include <vector>

#include <nlohmann/json.hpp>

namespace dugong::agent {
namespace {

const char* const kRequestKeys[] = {"cluster", "generation", "primary", "durationMs", "granter",
                                    "nonce",   "mac",        "release", "promote"};

// What the request's HMAC covers; the answer's adds its decision. The first field tells
// a request from an answer, so that neither can stand for the other.
// A release adds its two fields (a request for a promise is covered as before).
std::vector<std::string> requestFields(const char* kind, const FailsafeCall& c) {
  std::vector<std::string> fields{kind,
                                  c.cluster,
                                  c.request.primaryId,
                                  c.granter,
                                  std::to_string(c.request.generation),
                                  std::to_string(c.request.durationMs),
                                  c.nonce};
  if (c.request.release) {
    fields.emplace_back("release");
    fields.push_back(c.request.promote);
  }
  return fields;
}

std::vector<std::string> answerFields(const FailsafeCall& c, const driver::FailsafeAnswer& a) {
  auto fields = requestFields("dugong failsafe answer", c);
  fields.push_back(a.granted ? "granted" : "refused");
  fields.push_back(a.reason);
  return fields;
}

}  // namespace

std::string failsafeBody(const FailsafeCall& call, const std::optional<PeerKey>& key) {
  nlohmann::json j = {{"cluster", call.cluster},       {"generation", call.request.generation},
                      {"primary", call.request.primaryId}, {"durationMs", call.request.durationMs},
                      {"granter", call.granter},       {"nonce", call.nonce}};
  if (call.request.release) {
    j["release"] = true;
    j["promote"] = call.request.promote;
  }
  if (key) j["mac"] = key->mac(requestFields("dugong failsafe request", call));
  return j.dump();
}

Result<FailsafeCall> parseFailsafeBody(const std::string& body) {
  const std::string expected =
      "expected {\"cluster\": name, \"generation\": n, \"primary\": id, \"durationMs\": n, \"granter\": id, "
      "\"nonce\": hex, \"mac\": hex[, \"release\": true, \"promote\": the promote request]}";
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{"the body is not a JSON object: " + expected};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kRequestKeys) known = known || key == k;
    if (!known) return Error{"unknown key \"" + key + "\" (" + expected + ")"};
    if (key == "release" ? !value.is_boolean() : key != "generation" && key != "durationMs" && !value.is_string()) {
      return Error{"\"" + key + "\" is not a string (" + expected + ")"};
    }
  }
  if (!j.contains("cluster") || !j.contains("primary") || !j.contains("generation") ||
      !j["generation"].is_number_integer() || !j.contains("durationMs") || !j["durationMs"].is_number_integer()) {
    return Error{expected + ", found " + j.dump()};
  }
  driver::FailsafeRequest request{j["generation"].get<int64_t>(), j["primary"].get<std::string>(),
                                  j["durationMs"].get<int64_t>()};
  if (j.value("release", false)) {
    request = driver::FailsafeRequest::releaseFor(request.generation, request.primaryId, j.value("promote", std::string()));
  }
  return FailsafeCall{j["cluster"].get<std::string>(), std::move(request), j.value("granter", std::string()),
                      j.value("nonce", std::string()), j.value("mac", std::string())};
}

Result<bool> acceptFailsafeCall(const FailsafeCall& call, const std::string& cluster, const std::string& selfId,
                                const std::optional<PeerKey>& key) {
  if (call.cluster != cluster) return Error{"it is of cluster " + call.cluster + ", not " + cluster};
  if (!call.granter.empty() && call.granter != selfId) {
    return Error{"it is meant for " + call.granter + ", not for this peer (" + selfId + ")"};
  }
  if (!key) return true;
  if (call.mac.empty()) return Error{"it carries no MAC, and this agent has a peer key (http.peerKeyFile)"};
  if (call.granter.empty() || call.nonce.empty()) return Error{"it names no granter or no nonce"};
  if (!key->verifies(requestFields("dugong failsafe request", call), call.mac)) {
    return Error{"its MAC does not match: forged, changed on the way, or made under another key than this agent's "
                 "http.peerKeyFile"};
  }
  return true;
}

bool SeenNonces::firstSight(const std::string& nonce) {
  if (!seen_.insert(nonce).second) return false;
  order_.push_back(nonce);
  if (order_.size() > kRemembered) {
    seen_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

HttpReply failsafeReply(const FailsafeCall& call, const driver::FailsafeAnswer& answer, const std::optional<PeerKey>& key) {
  nlohmann::json j = {{"granted", answer.granted}, {"reason", answer.reason}, {"nonce", call.nonce}};
  if (key) j["mac"] = key->mac(answerFields(call, answer));
  return {200, "application/json", j.dump() + "\n"};
}

Result<driver::FailsafeAnswer> parseFailsafeReply(const HttpResponse& response, const FailsafeCall& asked,
                                          const std::optional<PeerKey>& key) {
  auto j = nlohmann::json::parse(response.body, nullptr, false);
  if (response.status != 200) {
    return Error{"HTTP " + std::to_string(response.status) +
                 (j.is_object() && j.contains("error") && j["error"].is_string() ? ": " + j["error"].get<std::string>()
                                                                                  : "")};
  }
  if (j.is_discarded() || !j.is_object() || !j.contains("granted") || !j["granted"].is_boolean() ||
      (j.contains("reason") && !j["reason"].is_string())) {
    return Error{"an answer without \"granted\": " + response.body};
  }
  driver::FailsafeAnswer answer{j["granted"].get<bool>(), j.value("reason", std::string())};
  if (!key) return answer;
  const auto text = [&j](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; };
  if (text("mac").empty()) return Error{"the answer carries no MAC, and this agent has a peer key: not believed"};
  if (text("nonce") != asked.nonce) {
    return Error{"the answer is to another request (not this request's nonce): a replay, not believed"};
  }
  if (!key->verifies(answerFields(asked, answer), text("mac"))) {
    return Error{"the answer's MAC does not match: forged, changed on the way, or made under another key: not "
                 "believed"};
  }
  return answer;
}

}  // namespace dugong::agent
