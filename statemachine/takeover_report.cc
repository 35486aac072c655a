#include "statemachine/takeover_report.h"

#include <utility>

namespace dugong {

nlohmann::json TakeoverReport::toJson() const {
  return {{"generation", generation},
          {"wal", wal.toString()},
          {"timeline", history.timeline},
          {"history", ancestorsToJson(history.ancestors)},
          {"instance", instance}};
}

Result<TakeoverReport> TakeoverReport::fromJson(const nlohmann::json& j) {
  const std::string what = "takeover report: ";
  if (!j.is_object()) return Error{what + "not an object"};
  auto integer = [&j](const char* key, int64_t min) {
    auto it = j.find(key);
    return it != j.end() && it->is_number_integer() && it->get<int64_t>() >= min;
  };
  TakeoverReport r;
  if (!integer("generation", 1)) return Error{what + "\"generation\" must be an integer >= 1"};
  r.generation = j["generation"].get<int64_t>();
  if (!j.contains("wal") || !j["wal"].is_string()) return Error{what + "\"wal\" must be a string X/Y"};
  auto wal = WalPosition::parse(j["wal"].get<std::string>());
  if (!wal) return Error{what + "\"wal\": " + wal.error()};
  r.wal = *wal;
  if (!integer("timeline", 1)) return Error{what + "\"timeline\" must be an integer >= 1"};
  r.history.timeline = j["timeline"].get<int64_t>();
  if (!j.contains("history")) return Error{what + "\"history\" is missing"};
  auto ancestors = ancestorsFromJson(j["history"]);
  if (!ancestors) return Error{what + ancestors.error()};
  r.history.ancestors = std::move(ancestors).value();
  int64_t timeline = 0;
  WalPosition end;
  for (const auto& a : r.history.ancestors) {
    if (a.timeline <= timeline || a.timeline >= r.history.timeline) {
      return Error{what + "\"history\": timelines must rise, each below the WAL's timeline " +
                   std::to_string(r.history.timeline)};
    }
    if (a.end < end || a.end > r.wal) {
      return Error{what + "\"history\": ends must not decrease, nor pass the WAL's end " + r.wal.toString()};
    }
    timeline = a.timeline;
    end = a.end;
  }
  if (j.contains("instance")) {
    if (!j["instance"].is_number_unsigned()) return Error{what + "\"instance\" must be an integer >= 0"};
    r.instance = j["instance"].get<uint64_t>();
  }
  return r;
}

Result<TakeoverReport> TakeoverReport::parse(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Error{"takeover report: not JSON"};
  return fromJson(j);
}

std::string TakeoverReport::describe() const {
  return "generation " + std::to_string(generation) + ": " + history.describe() + ", WAL " + wal.toString();
}

}  // namespace dugong
