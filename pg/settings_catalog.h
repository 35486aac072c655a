// What this PostgreSQL knows of its settings, asked of its own binary:
// - the catalog, from `postgres --describe-config`: each setting's context (postmaster:
//   takes effect at a restart; sighup and below: at a reload) and type. It leaves out
//   the settings marked "not in sample" (application_name, zero_damaged_pages, jit_*...),
//   which are real settings all the same: find() gives nothing for them.
// - checkWithPostgres: whether postgres accepts a set of values, as it checks them at
//   its start (kind, unit, range, enumerated values, each setting's own checks).
#pragma once

#include <map>
#include <optional>
#include <vector>
#include <string>

#include "statemachine/result.h"

namespace dugong::pg {

struct SettingInfo {
  std::string context;  // postmaster, sighup, superuser, user, ...
  std::string type;     // BOOLEAN, INTEGER, REAL, STRING, ENUM
  bool needsRestart() const { return context == "postmaster"; }
};

class SettingsCatalog {
 public:
  // Runs `<binDir>/postgres --describe-config` (bounded) and reads its output.
  static Result<SettingsCatalog> load(const std::string& binDir);
  // Reads the tab-separated output of `postgres --describe-config`.
  static SettingsCatalog parse(const std::string& describeConfigOutput);

  const SettingInfo* find(const std::string& name) const;
  size_t size() const { return settings_.size(); }

 private:
  std::map<std::string, SettingInfo> settings_;
};

// Writes `settings` into the postgresql.conf of a private scratch directory, each value
// quoted as dugong.conf quotes it (pg/managed_conf.h confQuote), and runs
// `<binDir>/postgres -C block_size -D <scratch>`, which reads and checks every line as
// at a start of postgres, then exits. postgres refuses to run as root: as root, it runs
// as `osUser`; otherwise as ourselves. Bounded (30 s). The error lists every value
// postgres refused, each with the setting's name and postgres' own reason, e.g.
//   invalid value for parameter "work_mem": "3TB" (Value exceeds integer range.)
Result<bool> checkWithPostgres(const std::map<std::string, std::string>& settings, const std::string& binDir,
                               const std::string& osUser);

// The messages of a failed `postgres -C` run (its output), without log prefixes, each
// HINT or DETAIL joined to its message, "in file ... line N" replaced by the setting
// written on that line (`lines`: the file's settings in order). Exposed for tests.
std::string postgresRefusals(const std::string& output, const std::vector<std::string>& lines);

}  // namespace dugong::pg
