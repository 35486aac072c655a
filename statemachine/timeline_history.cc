#include "statemachine/timeline_history.h"

namespace dugong {

int64_t TimelineHistory::timelineAt(WalPosition p) const {
  if (p.value() == 0) return 0;
  for (const auto& a : ancestors) {
    if (p <= a.end) return a.timeline;  // the byte before p lies before a's end
  }
  return timeline;
}

std::string TimelineHistory::describe() const {
  std::string out = "timeline " + std::to_string(timeline);
  std::string from;
  for (auto a = ancestors.rbegin(); a != ancestors.rend(); ++a) {
    from += (from.empty() ? "" : ", ") + std::string("from ") + std::to_string(a->timeline) + " at " +
            a->end.toString();
  }
  return from.empty() ? out : out + " (" + from + ")";
}

nlohmann::json ancestorsToJson(const std::vector<TimelineHistory::Ancestor>& ancestors) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : ancestors) out.push_back({a.timeline, a.end.toString()});
  return out;
}

Result<std::vector<TimelineHistory::Ancestor>> ancestorsFromJson(const nlohmann::json& j) {
  const Error shape{"\"history\" must be an array of [timeline, \"X/Y\"]"};
  if (!j.is_array()) return shape;
  std::vector<TimelineHistory::Ancestor> out;
  for (const auto& e : j) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || e[0].get<int64_t>() < 1 || !e[1].is_string()) {
      return shape;
    }
    auto end = WalPosition::parse(e[1].get<std::string>());
    if (!end) return Error{"\"history\": " + end.error()};
    out.push_back({e[0].get<int64_t>(), *end});
  }
  return out;
}

}  // namespace dugong
