#include "pg/plan/hot_standby.h"

#include <charconv>
#include <optional>
#include <sstream>
#include <utility>

namespace dugong::pg {
namespace {

// postgresql.conf name -> pg_controldata's label, and postgres' default.
struct Known {
  const char* name;
  const char* controlLabel;
  long postgresDefault;
};
constexpr Known kKnown[] = {
    {"max_connections", "max_connections setting:", 100},
    {"max_worker_processes", "max_worker_processes setting:", 8},
    {"max_wal_senders", "max_wal_senders setting:", 10},
    {"max_prepared_transactions", "max_prepared_xacts setting:", 0},
    {"max_locks_per_transaction", "max_locks_per_xact setting:", 64},
};

std::optional<long> integer(std::string s) {
  s.erase(0, s.find_first_not_of(" '"));
  s.erase(s.find_last_not_of(" '") + 1);
  long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<long> valueOf(const Known& k, const std::map<std::string, std::string>& settings,
                            const std::map<std::string, std::string>& defaults) {
  if (auto it = settings.find(k.name); it != settings.end()) return integer(it->second);
  if (auto it = defaults.find(k.name); it != defaults.end()) return integer(it->second);
  return k.postgresDefault;
}

}  // namespace

const std::vector<std::string>& hotStandbySettings() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const auto& k : kKnown) v.emplace_back(k.name);
    return v;
  }();
  return kNames;
}

std::map<std::string, long> hotStandbyValuesFromControlData(const std::string& output) {
  std::map<std::string, long> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    for (const auto& k : kKnown) {
      if (line.rfind(k.controlLabel, 0) != 0) continue;
      if (auto v = integer(line.substr(std::string(k.controlLabel).size()))) out[k.name] = *v;
    }
  }
  return out;
}

std::map<std::string, std::string> raiseToFloor(std::map<std::string, std::string> settings,
                                                const std::map<std::string, long>& floor,
                                                const std::map<std::string, std::string>& defaults) {
  for (const auto& k : kKnown) {
    auto f = floor.find(k.name);
    if (f == floor.end()) continue;
    auto current = valueOf(k, settings, defaults);
    if (current && *current < f->second) settings[k.name] = std::to_string(f->second);
  }
  return settings;
}

bool startsAtHotStandbyFloor(const std::string& role) { return role == "sync" || role == "async"; }

std::map<std::string, std::string> hotStandbyStartSettings(const std::string& role,
                                                           std::map<std::string, std::string> settings,
                                                           const std::map<std::string, long>& controlFloor,
                                                           const std::map<std::string, std::string>& defaults) {
  if (!startsAtHotStandbyFloor(role)) return settings;
  return raiseToFloor(std::move(settings), controlFloor, defaults);
}

std::vector<std::string> loweredHotStandbySettings(const std::map<std::string, std::string>& after,
                                                   const std::map<std::string, long>& running,
                                                   const std::map<std::string, std::string>& defaults) {
  std::vector<std::string> out;
  for (const auto& k : kKnown) {
    auto r = running.find(k.name);
    auto v = valueOf(k, after, defaults);
    if (r != running.end() && v && *v < r->second) out.emplace_back(k.name);
  }
  return out;
}

}  // namespace dugong::pg
