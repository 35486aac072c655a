#include "statemachine/data_state.h"

#include <tuple>

namespace dugong {

nlohmann::json PeerDataState::toJson() const {
  if (!setUp) return {{"setUp", false}};
  return {{"setUp", true}, {"systemId", systemId}, {"timeline", timeline}, {"wal", wal.toString()}};
}

Result<PeerDataState> PeerDataState::fromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("setUp") || !j["setUp"].is_boolean()) {
    return Error{"data state: \"setUp\" must be a boolean"};
  }
  PeerDataState d;
  d.setUp = j["setUp"].get<bool>();
  if (!d.setUp) return d;
  if (!j.contains("systemId") || !j["systemId"].is_string() || j["systemId"].get<std::string>().empty()) {
    return Error{"data state: \"systemId\" must be a non-empty string"};
  }
  if (!j.contains("timeline") || !j["timeline"].is_number_integer() || j["timeline"].get<int64_t>() < 1) {
    return Error{"data state: \"timeline\" must be an integer >= 1"};
  }
  if (!j.contains("wal") || !j["wal"].is_string()) return Error{"data state: \"wal\" must be a string X/Y"};
  auto wal = WalPosition::parse(j["wal"].get<std::string>());
  if (!wal) return Error{"data state: \"wal\": " + wal.error()};
  d.systemId = j["systemId"].get<std::string>();
  d.timeline = j["timeline"].get<int64_t>();
  d.wal = *wal;
  return d;
}

std::string PeerDataState::describe() const {
  if (!setUp) return "empty";
  return "system " + systemId + ", timeline " + std::to_string(timeline) + ", WAL " + wal.toString();
}

bool PeerDataState::aheadOf(const PeerDataState& other) const {
  return std::tie(timeline, wal) > std::tie(other.timeline, other.wal);
}

}  // namespace dugong
