#include "pg/options.h"

#include <arpa/inet.h>
#include <pwd.h>
#include <unistd.h>

#include <filesystem>

namespace dugong::pg {
namespace fs = std::filesystem;

const std::vector<std::string>& managedSettingNames() {
  static const std::vector<std::string> kNames = {
      "listen_addresses", "port", "unix_socket_directories", "unix_socket_permissions", "wal_log_hints", "hot_standby",
      "recovery_target_timeline", "synchronous_commit", "synchronous_standby_names",
      "default_transaction_read_only", "primary_conninfo", "primary_slot_name", "include", "include_dir",
      "include_if_exists", "data_directory", "hba_file", "ident_file", "max_slot_wal_keep_size"};
  return kNames;
}

std::string PgOptions::localHost() const {
  if (listenAddress.empty() || listenAddress == "*" || listenAddress == "0.0.0.0") return "127.0.0.1";
  if (listenAddress == "::") return "::1";
  auto comma = listenAddress.find(',');
  return comma == std::string::npos ? listenAddress : listenAddress.substr(0, comma);
}

bool isLoopbackCidr(const std::string& cidr) {
  auto slash = cidr.find('/');
  std::string addr = cidr.substr(0, slash);
  int bits = -1;
  if (slash != std::string::npos) {
    try {
      size_t used = 0;
      bits = std::stoi(cidr.substr(slash + 1), &used);
      if (used != cidr.size() - slash - 1) return false;
    } catch (const std::exception&) {
      return false;
    }
  }
  if (addr == "::1") return bits == -1 || bits == 128;
  in_addr a{};
  if (::inet_pton(AF_INET, addr.c_str(), &a) != 1) return false;
  if (bits == -1) bits = 32;
  return (ntohl(a.s_addr) >> 24) == 127 && bits >= 8 && bits <= 32;
}

namespace {
bool plainName(const std::string& s, size_t maxLen) {
  if (s.empty() || s.size() > maxLen) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}
}  // namespace

Result<bool> validateSettings(const std::map<std::string, std::string>& settings) {
  for (const auto& [k, v] : settings) {
    bool ok = !k.empty();
    for (char c : k) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.');
    if (!ok) return Error{"setting name '" + k + "' is not a postgres setting name"};
    for (const auto& m : managedSettingNames()) {
      if (k == m) return Error{"setting '" + k + "' is managed by dugong and cannot be set in settings"};
    }
    if (v.find('\n') != std::string::npos) return Error{"setting '" + k + "' has a newline in its value"};
    if (k == "wal_level" && v != "replica" && v != "logical") {
      return Error{"setting 'wal_level' must be replica or logical (standbys need at least replica), got '" + v + "'"};
    }
  }
  return true;
}

Result<bool> validateHbaLines(const std::vector<std::string>& lines) {
  for (const auto& line : lines) {
    if (line.find('\n') != std::string::npos) return Error{"a pg_hba line spans several lines: '" + line + "'"};
    if (line.find_first_not_of(" \t") == std::string::npos) return Error{"a pg_hba line is empty"};
  }
  return true;
}

Result<bool> validate(const PgOptions& o) {
  if (o.dataDir.empty() || o.dataDir[0] != '/') return Error{"dataDir must be an absolute path, got '" + o.dataDir + "'"};
  fs::path parent = fs::path(o.dataDir).lexically_normal().parent_path();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) return Error{"the parent of dataDir, " + parent.string() + ", is not a directory"};
  if (o.port <= 0 || o.port > 65535) return Error{"port " + std::to_string(o.port) + " is out of range"};
  if (o.listenAddress.find('\'') != std::string::npos) return Error{"listenAddress contains a quote"};
  if (!fs::is_directory(o.binDir, ec)) return Error{"binDir " + o.binDir + " is not a directory"};
  for (const char* tool : {"pg_ctl", "initdb", "postgres", "pg_basebackup", "pg_rewind", "pg_controldata"}) {
    std::string path = o.binDir + "/" + tool;
    if (::access(path.c_str(), X_OK) != 0) return Error{"binDir " + o.binDir + " has no executable " + tool};
  }
  if (o.osUser.empty()) return Error{"osUser is empty"};
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(o.osUser.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return Error{"osUser '" + o.osUser + "' does not exist"};
  }
  if (pw.pw_uid == 0) return Error{"osUser '" + o.osUser + "' is root; postgres refuses to run as root"};
  if (!plainName(o.peerId, 63)) {
    return Error{"peerId '" + o.peerId + "' must be 1-63 characters of [A-Za-z0-9_.:-] (it is the application_name)"};
  }
  if (!plainName(o.superuser, 63)) return Error{"superuser '" + o.superuser + "' is not a plain role name"};
  if (!plainName(o.replicationUser, 63)) {
    return Error{"replicationUser '" + o.replicationUser + "' is not a plain role name"};
  }
  if (o.replicationCidr.empty() || o.replicationCidr.find_first_of(" \t\n#") != std::string::npos) {
    return Error{"replicationCidr '" + o.replicationCidr + "' is not a CIDR"};
  }
  if (!o.replicationPassword && !isLoopbackCidr(o.replicationCidr)) {
    return Error{"replicationCidr " + o.replicationCidr +
                 " reaches beyond loopback, and replicationPassword (or replicationPasswordFile) is not set: "
                 "anyone who reaches the port could read the whole database as " + o.replicationUser +
                 ". Set a replication password (standbys then authenticate with scram-sha-256)"};
  }
  if (!o.replicationPassword && !o.allowTrust) {
    return Error{"replicationPassword (or replicationPasswordFile) is not set: standbys authenticate with "
                 "scram-sha-256. Set one, or set allowTrust: true to replicate without a password on the "
                 "loopback replicationCidr " + o.replicationCidr};
  }
  for (const std::optional<std::string>* secret : {&o.superuserPassword, &o.replicationPassword}) {
    if (*secret && secret->value().empty()) return Error{"a password is set but empty"};
  }
  if (o.socketPath().empty() || o.socketPath()[0] != '/' || o.socketPath().size() > 80) {
    return Error{"socketDir '" + o.socketPath() + "' must be an absolute path of at most 80 characters"};
  }
  if (o.maxSlotWalKeepSize.empty() || o.maxSlotWalKeepSize.find_first_of("'\n") != std::string::npos) {
    return Error{"maxSlotWalKeepSize '" + o.maxSlotWalKeepSize + "' is not a size like 16GB or -1"};
  }
  if (auto tls = validateTls(o.tls); !tls) return tls;
  if (auto ok = validateHbaLines(o.extraHbaLines); !ok) return ok;
  if (auto ok = validateSettings(o.settings); !ok) return ok;
  for (const auto& [k, v] : o.settings) {
    for (const auto& [name, value] : serverTlsSettings(o.tls)) {
      if (k == name) return Error{"setting '" + k + "' is managed by dugong when tls.certFile is set"};
    }
  }
  auto positive = [](auto d) { return d.count() > 0; };
  if (!positive(o.initdbTimeout) || !positive(o.startTimeout) || !positive(o.stopTimeout) ||
      !positive(o.promoteTimeout) || !positive(o.basebackupTimeout) || !positive(o.rewindTimeout) ||
      !positive(o.repairStandbyAfter) ||
      !positive(o.queryTimeout) || !positive(o.healthInterval) || !positive(o.writablePollInterval)) {
    return Error{"every timeout and interval must be positive"};
  }
  return true;
}

}  // namespace dugong::pg
