#include "tools/adm/hot_standby_rollout.h"

#include "pg/plan/hot_standby.h"

namespace dugong::adm {
namespace {

// A setting's value as written in the configuration ("90", "'90'"), without its quotes:
// a number as postgres shows it.
std::string unquotedValue(std::string s) {
  s.erase(0, s.find_first_not_of(" '"));
  s.erase(s.find_last_not_of(" '") + 1);
  return s;
}

const nlohmann::json& postgresField(const PeerView& p, const char* key) {
  static const nlohmann::json kNull;
  if (!p.status.is_object() || !p.status.contains("postgres") || !p.status["postgres"].is_object()) return kNull;
  const auto& postgres = p.status["postgres"];
  auto it = postgres.find(key);
  return it == postgres.end() ? kNull : *it;
}

}  // namespace

std::map<std::string, long> runningHotStandbyValues(const PeerView& p) {
  std::map<std::string, long> out;
  const auto& values = postgresField(p, "hotStandbyValues");
  if (!values.is_object()) return out;
  for (const auto& [k, v] : values.items()) {
    if (v.is_number_integer()) out[k] = v.get<long>();
  }
  return out;
}

std::vector<HotStandbyMismatch> hotStandbyMismatches(const PeerView& p,
                                                     const std::map<std::string, std::string>& settings,
                                                     const std::map<std::string, std::string>& defaults) {
  std::vector<HotStandbyMismatch> out;
  const auto values = runningHotStandbyValues(p);
  for (const auto& name : pg::hotStandbySettings()) {
    auto v = values.find(name);
    if (v == values.end()) continue;
    const long running = v->second;
    const auto* source = settings.count(name) ? &settings : defaults.count(name) ? &defaults : nullptr;
    if (source == nullptr) {
      // Postgres' own default, which pg/hot_standby.h knows: above it is "lowered".
      if (!pg::loweredHotStandbySettings(settings, {{name, running}}, defaults).empty()) {
        out.push_back({name, running, "postgres' default"});
      }
      continue;
    }
    const std::string& text = source->at(name);
    if (unquotedValue(text) != std::to_string(running)) out.push_back({name, running, text});
  }
  return out;
}

std::string describeMismatches(const std::vector<HotStandbyMismatch>& mismatches) {
  std::string out;
  for (const auto& m : mismatches) {
    out += (out.empty() ? "" : ", ") + m.name + " = " + std::to_string(m.running) + " (configured: " + m.configured +
           ")";
  }
  return out;
}

std::optional<WalPosition> replayPosition(const PeerView& p) {
  const auto& j = postgresField(p, "replayLsn");
  if (!j.is_string()) return std::nullopt;
  auto w = WalPosition::parse(j.get<std::string>());
  if (!w) return std::nullopt;
  return *w;
}

}  // namespace dugong::adm
