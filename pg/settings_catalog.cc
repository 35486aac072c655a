#include "pg/settings_catalog.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include <pwd.h>
#include <unistd.h>

#include "pg/command.h"
#include "pg/managed_conf.h"

namespace dugong::pg {
namespace {

std::vector<std::string> splitTabs(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) out.push_back(field);
  return out;
}

// A scratch directory owned by `owner` (when we are root), removed with this object.
class ScratchDir {
 public:
  explicit ScratchDir(std::optional<std::pair<uid_t, gid_t>> owner) : owner_(owner) {
    std::string pattern = (std::filesystem::temp_directory_path() / "dugong-settings-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
    chown(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  Result<bool> write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream out(file, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Error{"cannot write " + file};
    return chown(file) ? Result<bool>(true) : Error{"cannot give " + file + " to postgres' user"};
  }

 private:
  bool chown(const std::string& path) const {
    return !owner_ || path.empty() || ::chown(path.c_str(), owner_->first, owner_->second) == 0;
  }
  std::optional<std::pair<uid_t, gid_t>> owner_;
  std::string path_;
};

}  // namespace

SettingsCatalog SettingsCatalog::parse(const std::string& output) {
  SettingsCatalog c;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    auto f = splitTabs(line);
    if (f.size() < 7 || f[0].empty()) continue;
    c.settings_[f[0]] = SettingInfo{.context = f[1], .type = f[3]};
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

std::string postgresRefusals(const std::string& output, const std::vector<std::string>& lines) {
  static const std::regex kSeverity("(LOG|HINT|DETAIL|WARNING|ERROR|FATAL):  (.*)$");
  static const std::regex kFileLine(" in file \"[^\"]*\" line ([0-9]+)");
  std::string out, fatal;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, kSeverity)) continue;
    const std::string severity = m[1];
    std::string text = m[2];
    if (std::smatch f; std::regex_search(text, f, kFileLine)) {
      const size_t n = std::stoul(f[1]);
      const bool named = n >= 1 && n <= lines.size() && text.find('"' + lines[n - 1] + '"') != std::string::npos;
      text = f.prefix().str() + (n >= 1 && n <= lines.size() && !named ? " (setting " + lines[n - 1] + ")" : "") +
             f.suffix().str();
    }
    if (severity == "HINT" || severity == "DETAIL") {
      if (!out.empty()) out += " (" + text + ")";
    } else if (severity == "FATAL") {
      fatal = text;
    } else if (text.rfind("skipping missing configuration file", 0) != 0) {
      out += (out.empty() ? "" : "; ") + text;
    }
  }
  if (out.empty()) return fatal;  // a refusal postgres gave no detail for
  return out;
}

Result<bool> checkWithPostgres(const std::map<std::string, std::string>& settings, const std::string& binDir,
                               const std::string& osUser) {
  CommandSpec spec;
  std::optional<std::pair<uid_t, gid_t>> owner;
  if (::geteuid() == 0) {
    passwd pw{};
    passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r(osUser.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      return Error{"cannot check the settings with postgres: its user '" + osUser + "' does not exist here"};
    }
    owner = {pw.pw_uid, pw.pw_gid};
    spec.runAsUser = osUser;
  }
  ScratchDir dir(owner);
  if (dir.path().empty()) return Error{"cannot check the settings with postgres: no scratch directory"};
  std::string conf;
  std::vector<std::string> lines;
  for (const auto& [k, v] : settings) {
    conf += k + " = " + confQuote(v) + "\n";
    lines.push_back(k);
  }
  if (auto w = dir.write("postgresql.conf", conf); !w) return w;
  if (auto w = dir.write("postgresql.auto.conf", ""); !w) return w;
  spec.argv = {binDir + "/postgres", "-C", "block_size", "-D", dir.path()};
  spec.timeout = std::chrono::seconds(30);
  CommandResult r = runCommand(spec);
  if (r.ok()) return true;
  const std::string refusals = r.started && !r.timedOut && r.signal == 0 ? postgresRefusals(r.output, lines) : "";
  if (refusals.empty()) {
    return Error{"cannot check the settings with " + spec.argv[0] + " -C: " + r.describe() +
                 (r.output.empty() ? "" : ": " + r.output.substr(r.output.size() - std::min<size_t>(r.output.size(), 300)))};
  }
  return Error{"postgres refuses: " + refusals};
}

}  // namespace dugong::pg
