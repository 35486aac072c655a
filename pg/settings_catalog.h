// What this PostgreSQL knows of its settings, from `postgres --describe-config`: each
// setting's name, context (postmaster: takes effect at a restart; sighup and below: at
// a reload) and type, with the bounds of integers and reals. Lets `dugong-adm config`
// refuse an unknown setting or a value of the wrong type before anything is written.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "statemachine/result.h"

namespace dugong::pg {

struct SettingInfo {
  std::string context;  // postmaster, sighup, superuser, user, ...
  std::string type;     // BOOLEAN, INTEGER, REAL, STRING, ENUM
  std::optional<double> min, max;  // INTEGER and REAL, in the setting's base unit
  bool needsRestart() const { return context == "postmaster"; }
};

class SettingsCatalog {
 public:
  // Runs `<binDir>/postgres --describe-config` (bounded) and reads its output.
  static Result<SettingsCatalog> load(const std::string& binDir);
  // Reads the tab-separated output of `postgres --describe-config`.
  static SettingsCatalog parse(const std::string& describeConfigOutput);

  const SettingInfo* find(const std::string& name) const;
  // An error naming the problem: an unknown setting (custom "ext.name" settings are
  // accepted as strings), a boolean that is not one, a number that is not a number
  // (with an optional unit: 128MB, 10s) or out of range (a number without unit).
  Result<bool> check(const std::string& name, const std::string& value) const;
  size_t size() const { return settings_.size(); }

 private:
  std::map<std::string, SettingInfo> settings_;
};

}  // namespace dugong::pg
