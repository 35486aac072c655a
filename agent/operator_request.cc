#include "agent/operator_request.h"

namespace dugong::agent {

std::string OperatorRequest::serialize() const {
  return nlohmann::json({{"id", id}, {"action", action}, {"expireTime", formatIso8601(expireTime)}, {"by", by}}).dump();
}

Result<OperatorRequest> OperatorRequest::parse(std::string_view bytes) {
  auto j = nlohmann::json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{"the request is not a JSON object"};
  OperatorRequest r;
  if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty()) {
    return Error{"the request has no id"};
  }
  r.id = j["id"].get<std::string>();
  r.action = j.value("action", "");
  if (r.action != "restart" && r.action != "reload") {
    return Error{"unknown action '" + r.action + "' (known: restart, reload)"};
  }
  auto expire = parseTime(j.value("expireTime", ""));
  if (!expire) return Error{"the request has no valid expireTime: " + expire.error()};
  r.expireTime = *expire;
  r.by = j.value("by", "");
  return r;
}

nlohmann::json RequestStatus::toJson() const {
  return {{"id", id}, {"action", action}, {"state", state}, {"detail", detail}};
}

}  // namespace dugong::agent
