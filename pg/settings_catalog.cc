#include "pg/settings_catalog.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>
#include <vector>

#include "pg/command.h"

namespace dugong::pg {
namespace {

std::vector<std::string> splitTabs(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) out.push_back(field);
  return out;
}

std::optional<double> number(const std::string& s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// postgres' boolean spellings (parse_bool): unique prefixes of on/off/true/false/yes/no, 1, 0.
bool isBoolean(const std::string& value) {
  std::string v = lower(value);
  if (v.empty()) return false;
  if (v == "1" || v == "0" || v == "on" || v == "off") return true;
  for (const char* word : {"true", "false", "yes", "no"}) {
    if (std::string(word).rfind(v, 0) == 0) return true;
  }
  return false;
}

}  // namespace

SettingsCatalog SettingsCatalog::parse(const std::string& output) {
  SettingsCatalog c;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    auto f = splitTabs(line);
    if (f.size() < 7 || f[0].empty()) continue;
    SettingInfo info;
    info.context = f[1];
    info.type = f[3];
    if (info.type == "INTEGER" || info.type == "REAL") {
      info.min = number(f[5]);
      info.max = number(f[6]);
    }
    c.settings_[f[0]] = std::move(info);
  }
  return c;
}

Result<SettingsCatalog> SettingsCatalog::load(const std::string& binDir) {
  CommandSpec spec;
  spec.argv = {binDir + "/postgres", "--describe-config"};
  spec.timeout = std::chrono::seconds(30);
  CommandResult r = runCommand(spec);
  if (!r.ok()) {
    return Error{"cannot list postgres' settings with " + spec.argv[0] + " --describe-config: " + r.describe()};
  }
  auto c = parse(r.output);
  if (c.size() == 0) return Error{spec.argv[0] + " --describe-config listed no settings"};
  return c;
}

const SettingInfo* SettingsCatalog::find(const std::string& name) const {
  auto it = settings_.find(name);
  return it == settings_.end() ? nullptr : &it->second;
}

Result<bool> SettingsCatalog::check(const std::string& name, const std::string& value) const {
  const SettingInfo* info = find(name);
  if (info == nullptr) {
    if (name.find('.') != std::string::npos) return true;  // an extension's custom setting
    return Error{"setting '" + name + "' is not a PostgreSQL setting (unknown to " +
                 "postgres --describe-config)"};
  }
  if (info->type == "BOOLEAN" && !isBoolean(value)) {
    return Error{"setting '" + name + "' is a boolean (on/off), got '" + value + "'"};
  }
  if (info->type == "INTEGER" || info->type == "REAL") {
    // A number, optionally followed by a unit (postgres checks which units fit).
    size_t unit = value.find_first_not_of("+-0123456789.eE");
    if (value.rfind("0x", 0) == 0) return true;
    std::string digits = value.substr(0, unit);
    std::string suffix = unit == std::string::npos ? "" : value.substr(unit);
    static const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "us", "ms", "s", "min", "h", "d"};
    bool unitOk = suffix.empty() ||
                  std::any_of(std::begin(kUnits), std::end(kUnits), [&](const char* u) { return suffix == u; });
    auto v = number(digits);
    const bool fraction = v && *v != static_cast<double>(static_cast<long long>(*v));
    if (!v || !unitOk || (info->type == "INTEGER" && suffix.empty() && fraction)) {
      return Error{"setting '" + name + "' is " + (info->type == "INTEGER" ? "an integer" : "a number") +
                   " (with an optional unit such as 128MB or 10s), got '" + value + "'"};
    }
    if (suffix.empty() && ((info->min && *v < *info->min) || (info->max && *v > *info->max))) {
      std::ostringstream range;
      range << "setting '" << name << "' must be between " << info->min.value_or(0) << " and "
            << info->max.value_or(0) << ", got " << value;
      return Error{range.str()};
    }
  }
  return true;
}

}  // namespace dugong::pg
