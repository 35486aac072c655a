#include "statemachine/data_state.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace dugong {

nlohmann::json PeerDataState::toJson() const {
  if (!setUp) return {{"setUp", false}};
  nlohmann::json j = {{"setUp", true}, {"systemId", systemId}, {"timeline", timeline}, {"wal", wal.toString()}};
  if (ancestors) j["history"] = ancestorsToJson(*ancestors);
  return j;
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
  if (j.contains("history")) {
    auto history = ancestorsFromJson(j["history"]);
    if (!history) return Error{"data state: " + history.error()};
    d.ancestors = std::move(history).value();
  }
  return d;
}

std::string PeerDataState::describe() const {
  if (!setUp) return "empty";
  return "system " + systemId + ", timeline " + std::to_string(timeline) + ", WAL " + wal.toString();
}

bool PeerDataState::aheadOf(const PeerDataState& other) const {
  return std::tie(timeline, wal) > std::tie(other.timeline, other.wal);
}

bool PeerDataState::keeps(const PeerDataState& other) const {
  if (!setUp || !other.setUp) return true;
  if (!ancestors || !other.ancestors) return true;
  const std::vector<TimelineHistory::Ancestor>& mine = *ancestors;
  const std::vector<TimelineHistory::Ancestor>& theirs = *other.ancestors;
  // Other's history before its timeline must be this one's (timeline numbers alone may
  // repeat on histories that diverged).
  if (theirs.size() > mine.size() || !std::equal(theirs.begin(), theirs.end(), mine.begin())) return false;
  // A prefix: up to other's end, this WAL is on other's timeline.
  const TimelineHistory history{timeline, mine};
  if (other.wal <= wal && history.timelineAt(other.wal) == other.timeline) return true;
  if (other.wal.value() == 0) return true;
  // Past a fork: this history left other's timeline (the next entry after the shared ones).
  return theirs.size() < mine.size() && mine[theirs.size()].timeline == other.timeline;
}

}  // namespace dugong
