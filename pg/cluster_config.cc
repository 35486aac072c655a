#include "pg/cluster_config.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "pg/pgbackrest.h"

namespace dugong::pg {

nlohmann::json ClusterReplication::toJson() const {
  return {{"mode", mode == ReplicationMode::kQuorum ? "quorum" : "sync"}, {"k", k}, {"size", size}};
}

std::string ClusterReplication::describe() const {
  if (mode == ReplicationMode::kQuorum) {
    return "quorum: a commit waits for " + std::to_string(k) + " of a set of " + std::to_string(size) + " members";
  }
  return "sync (Manatee's one sync; k " + std::to_string(k) + " and size " + std::to_string(size) +
         " kept for quorum mode)";
}

const std::vector<std::string>& replicationKeys() {
  static const std::vector<std::string> keys = {"mode", "k", "size"};
  return keys;
}

Result<bool> setReplicationField(ClusterReplication& r, const std::string& key, const std::string& value) {
  if (key == "mode") {
    if (value != "sync" && value != "quorum") {
      return Error{"replication.mode: expected sync or quorum, found \"" + value + "\""};
    }
    r.mode = value == "quorum" ? ReplicationMode::kQuorum : ReplicationMode::kSync;
    return true;
  }
  if (key != "k" && key != "size") {
    return Error{"replication." + key + ": unknown (replication.mode, replication.k and replication.size are known)"};
  }
  int n = 0;
  size_t used = 0;
  try {
    n = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size()) return Error{"replication." + key + ": expected a whole number, found \"" + value + "\""};
  (key == "k" ? r.k : r.size) = n;
  return true;
}

Result<bool> validateReplication(const ClusterReplication& r) {
  if (r.k < 1 || r.k > 64) return Error{"replication.k: " + std::to_string(r.k) + " is outside 1..64"};
  if (r.size < 2 || r.size > 64) return Error{"replication.size: " + std::to_string(r.size) + " is outside 2..64"};
  if (r.k >= r.size) {
    return Error{"replication.k (" + std::to_string(r.k) + ") must be below replication.size (" +
                 std::to_string(r.size) + "): with k = size every member's failure stalls writes"};
  }
  return true;
}

std::string ClusterConfig::serialize() const {
  nlohmann::json j = {{"format", format()}, {"settings", settings}, {"hba", hba}};
  if (!backup.empty()) j["backup"] = backup;
  if (replication) j["replication"] = replication->toJson();
  return j.dump(2) + "\n";
}

Result<ClusterConfig> ClusterConfig::parse(std::string_view bytes) {
  auto j = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error{"the cluster configuration is not a JSON object"};
  ClusterConfig c;
  try {
    const int format = j.value("format", 0);
    if (format < 1) return Error{"the cluster configuration has no format (a positive integer)"};
    if (format > kClusterConfigFormat) {
      return Error{"the cluster configuration has format " + std::to_string(format) + ", newer than the format " +
                   std::to_string(kClusterConfigFormat) +
                   " this dugong knows; it was written by a newer version: upgrade this dugong first"};
    }
    const nlohmann::json settings = j.value("settings", nlohmann::json::object());
    if (!settings.is_object()) return Error{"cluster configuration: settings must be an object"};
    for (const auto& [k, v] : settings.items()) {
      if (!v.is_string()) return Error{"cluster configuration: setting '" + k + "' is not a string"};
      c.settings[k] = v.get<std::string>();
    }
    c.hba = j.value("hba", std::vector<std::string>{});
    const nlohmann::json backup = j.value("backup", nlohmann::json::object());
    if (!backup.is_object()) return Error{"cluster configuration: backup must be an object"};
    for (const auto& [k, v] : backup.items()) {
      if (!v.is_string()) return Error{"cluster configuration: backup." + k + " is not a string"};
      c.backup[k] = v.get<std::string>();
    }
    if (auto r = j.find("replication"); r != j.end()) {
      if (format < 2) return Error{"cluster configuration: the replication field needs format 2"};
      if (!r->is_object()) return Error{"cluster configuration: replication must be an object"};
      ClusterReplication rep;
      for (const auto& [k, v] : r->items()) {
        if (k == "mode" && !v.is_string()) return Error{"cluster configuration: replication.mode is not a string"};
        if (k != "mode" && !v.is_number_integer()) {
          return Error{"cluster configuration: replication." + k + " is not a whole number"};
        }
        auto set = setReplicationField(rep, k, k == "mode" ? v.get<std::string>() : std::to_string(v.get<int64_t>()));
        if (!set) return Error{"cluster configuration: " + set.error()};
      }
      c.replication = rep;
    }
    for (const auto& [k, v] : j.items()) {
      if (k != "format" && k != "settings" && k != "hba" && k != "backup" && k != "replication") {
        return Error{"cluster configuration: unknown field '" + k + "' (known: format, settings, hba, backup, "
                     "replication)"};
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return Error{std::string("cluster configuration: ") + e.what()};
  }
  return c;
}

Result<bool> validateClusterConfig(const ClusterConfig& config) {
  if (auto ok = validateSettings(config.settings); !ok) return ok;
  if (auto b = BackupSettings::parse(config.backup); !b) return Error{b.error()};
  if (config.replication) {
    if (auto ok = validateReplication(*config.replication); !ok) return ok;
  }
  return validateHbaLines(config.hba);
}

PgOptions withClusterConfig(const PgOptions& host, const ClusterConfig& cluster) {
  PgOptions out = host;
  for (const auto& [k, v] : cluster.settings) out.settings.emplace(k, v);  // the host's value wins
  if (auto backup = BackupSettings::parse(cluster.backup)) {
    for (const auto& [k, v] : archiveSettings(*backup, host)) out.settings.emplace(k, v);
  }
  out.extraHbaLines.insert(out.extraHbaLines.end(), cluster.hba.begin(), cluster.hba.end());
  return out;
}

Result<std::pair<std::string, std::string>> parseAssignment(const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return Error{"'" + text + "' is not KEY=VALUE"};
  const char* ws = " \t";
  std::string key = text.substr(0, eq);
  key.erase(0, key.find_first_not_of(ws));
  key.erase(key.find_last_not_of(ws) + 1);
  if (key.empty()) return Error{"'" + text + "' has no key before '='"};
  // The value: from its first character that is not a space, exactly (a trailing space
  // is part of it), or, when it is written in single quotes, what they enclose.
  std::string value = text.substr(eq + 1);
  value.erase(0, std::min(value.size(), value.find_first_not_of(ws)));
  if (value.empty() || value[0] != '\'') return std::pair{key, value};
  std::string unquoted;
  size_t i = 1;
  for (; i < value.size(); ++i) {
    if (value[i] != '\'') {
      unquoted += value[i];
    } else if (i + 1 < value.size() && value[i + 1] == '\'') {
      unquoted += '\'';  // '' inside the quotes: one quote
      ++i;
    } else {
      break;
    }
  }
  if (i != value.size() - 1) {
    return Error{"the value of " + key + " starts with a quote but is not one quoted string ('...', with '' for a "
                 "quote inside): " + value};
  }
  return std::pair{key, unquoted};
}

std::vector<std::string> shadowedSettings(const PgOptions& host, const ClusterConfig& cluster) {
  std::vector<std::string> out;
  for (const auto& [k, v] : cluster.settings) {
    if (host.settings.count(k)) out.push_back(k);
  }
  return out;
}

std::vector<std::string> changedSettings(const std::map<std::string, std::string>& before,
                                         const std::map<std::string, std::string>& after) {
  std::vector<std::string> out;
  for (const auto& [k, v] : before) {
    auto it = after.find(k);
    if (it == after.end() || it->second != v) out.push_back(k);
  }
  for (const auto& [k, v] : after) {
    if (!before.count(k)) out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dugong::pg
