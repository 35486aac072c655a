#include "pg/cluster_config_guard.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <sstream>

#include <arpa/inet.h>

#include "pg/options.h"

namespace dugong::pg {
namespace {

std::string lowered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// postgres' parse_bool: 1/0, on/off, and any prefix of true/false/yes/no ("of" for off).
std::optional<bool> pgBool(const std::string& value) {
  const std::string v = lowered(value);
  if (v.empty()) return std::nullopt;
  auto prefixOf = [&](const std::string& word, size_t minLen) { return v.size() >= minLen && word.rfind(v, 0) == 0; };
  if (v == "1" || prefixOf("true", 1) || prefixOf("yes", 1) || prefixOf("on", 2)) return true;
  if (v == "0" || prefixOf("false", 1) || prefixOf("no", 1) || prefixOf("off", 2)) return false;
  return std::nullopt;
}

// The number a value starts with (its unit, if any, after it); none when it does not.
std::optional<double> leadingNumber(const std::string& value) {
  const char* begin = value.c_str();
  char* end = nullptr;
  double v = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  return v;
}

struct Rule {
  const char* name;
  bool (*refuses)(const std::string& value);
  const char* why;
};

bool anyValue(const std::string& v) { return !v.empty(); }
bool notLibdir(const std::string& v) { return v != "$libdir"; }
bool notLlvmjit(const std::string& v) { return v != "llvmjit"; }
bool isOff(const std::string& v) { return pgBool(v) == false; }
bool isOn(const std::string& v) { return pgBool(v) == true; }
bool isZero(const std::string& v) { return leadingNumber(v) == 0.0; }
bool isNonZero(const std::string& v) { return leadingNumber(v).value_or(0) != 0; }
bool isNegative(const std::string& v) { return leadingNumber(v).value_or(0) < 0; }
bool outsideDataDir(const std::string& v) { return (!v.empty() && v[0] == '/') || v.find("..") != std::string::npos; }
bool hasSlash(const std::string& v) { return v.find('/') != std::string::npos; }

constexpr const char* kRunsCommand = "runs a command as postgres on every peer";
constexpr const char* kLoadsCode = "loads code into postgres on every peer";

// Sorted by name.
const Rule kRules[] = {
    {.name = "archive_cleanup_command", .refuses = anyValue, .why = kRunsCommand},
    {.name = "archive_command", .refuses = anyValue,
     .why = "runs a command as postgres on every peer (backup.archive=on sets dugong's own)"},
    {.name = "archive_library", .refuses = anyValue, .why = kLoadsCode},
    {.name = "dynamic_library_path", .refuses = notLibdir, .why = "makes postgres load code from other directories"},
    {.name = "external_pid_file", .refuses = anyValue,
     .why = "makes postgres overwrite a file of its choosing (a data file, a configuration file)"},
    {.name = "fsync", .refuses = isOff, .why = "loses committed transactions and corrupts data at a host's crash"},
    {.name = "full_page_writes", .refuses = isOff,
     .why = "leaves torn pages after a crash, and pg_rewind (every rejoin) needs it"},
    {.name = "ignore_invalid_pages", .refuses = isOn, .why = "lets recovery go on past corrupt data"},
    {.name = "jit_provider", .refuses = notLlvmjit, .why = kLoadsCode},
    {.name = "local_preload_libraries", .refuses = anyValue, .why = kLoadsCode},
    {.name = "log_directory", .refuses = outsideDataDir,
     .why = "makes postgres write its log outside its data directory (a path of the writer's choosing)"},
    {.name = "log_filename", .refuses = hasSlash, .why = "makes postgres write its log into another directory"},
    {.name = "max_replication_slots", .refuses = isZero, .why = "leaves standbys no slot: they cannot follow"},
    {.name = "max_standby_archive_delay", .refuses = isNegative,
     .why = "lets a query hold replay forever: a takeover waits for it"},
    {.name = "max_standby_streaming_delay", .refuses = isNegative,
     .why = "lets a query hold replay forever: a takeover waits for it"},
    {.name = "max_wal_senders", .refuses = isZero, .why = "stops all replication: no standby, no sync, no takeover"},
    {.name = "promote_trigger_file", .refuses = anyValue,
     .why = "lets a file promote a standby behind dugong's back: two primaries"},
    {.name = "recovery_end_command", .refuses = anyValue, .why = kRunsCommand},
    {.name = "recovery_min_apply_delay", .refuses = isNonZero,
     .why = "keeps standbys behind: the sync's acknowledged commits are not replayed when it takes over"},
    {.name = "recovery_target", .refuses = anyValue, .why = "stops a standby's replay short of the primary's WAL"},
    {.name = "recovery_target_lsn", .refuses = anyValue, .why = "stops a standby's replay short of the primary's WAL"},
    {.name = "recovery_target_name", .refuses = anyValue, .why = "stops a standby's replay short of the primary's WAL"},
    {.name = "recovery_target_time", .refuses = anyValue, .why = "stops a standby's replay short of the primary's WAL"},
    {.name = "recovery_target_xid", .refuses = anyValue, .why = "stops a standby's replay short of the primary's WAL"},
    {.name = "restore_command", .refuses = anyValue, .why = kRunsCommand},
    {.name = "session_preload_libraries", .refuses = anyValue, .why = kLoadsCode},
    {.name = "shared_preload_libraries", .refuses = anyValue, .why = kLoadsCode},
    {.name = "ssl_passphrase_command", .refuses = anyValue, .why = kRunsCommand},
    {.name = "zero_damaged_pages", .refuses = isOn, .why = "destroys damaged pages' rows instead of reporting them"},
};

const Rule* ruleFor(const std::string& name) {
  for (const auto& r : kRules) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

// pg_hba fields: whitespace-separated, "#" starts a comment; double quotes keep a
// field together (and are not part of the name compared).
std::vector<std::string> hbaFields(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && c == '#') {
      break;
    } else if (!quoted && (c == ' ' || c == '\t')) {
      if (any) out.push_back(field);
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (any) out.push_back(field);
  return out;
}

// "255.255.255.0" -> 24; none when not a contiguous IPv4 mask.
std::optional<int> maskBits(const std::string& mask) {
  in_addr a{};
  if (::inet_pton(AF_INET, mask.c_str(), &a) != 1) return std::nullopt;
  uint32_t m = ntohl(a.s_addr);
  int bits = 0;
  while (bits < 32 && (m & (0x80000000u >> bits))) ++bits;
  if (bits < 32 && (m << bits) != 0) return std::nullopt;
  return bits;
}

// The address of a host line (with its separate mask, if any) reaches only this host.
bool reachesOnlyThisHost(const std::vector<std::string>& f) {
  if (f.size() < 4) return true;  // not a complete line: postgres refuses it anyway
  const std::string& addr = f[3];
  if (addr == "localhost" || addr == "samehost") return true;
  if (addr.find('/') == std::string::npos && f.size() > 4) {
    if (auto bits = maskBits(f[4])) return isLoopbackCidr(addr + "/" + std::to_string(*bits));
  }
  return isLoopbackCidr(addr);
}

bool namesUser(const std::string& usersField, const std::string& user) {
  std::istringstream in(usersField);
  std::string u;
  while (std::getline(in, u, ',')) {
    if (u == user) return true;
  }
  return false;
}

void addHbaParts(const std::string& line, const std::string& superuser, std::vector<UnsafePart>* out) {
  auto f = hbaFields(line);
  if (f.size() < 5 || f[0].rfind("host", 0) != 0 || reachesOnlyThisHost(f)) return;
  // The method is the first field after the address (and its mask).
  size_t method = f[3].find('/') == std::string::npos && maskBits(f[4]) ? 5 : 4;
  if (method < f.size() && (f[method] == "trust" || f[method] == "ident")) {
    out->push_back({kAllowHbaTrust, line,
                    "admits clients from beyond this host without a password (" + f[method] +
                        "): anyone who reaches the port is whoever they say"});
  }
  if (namesUser(f[2], superuser)) {
    out->push_back({kAllowHbaSuperuser, line,
                    "admits the superuser " + superuser +
                        " from beyond this host (dugong admits it on loopback only): a superuser can run "
                        "commands as postgres"});
  }
}

}  // namespace

std::vector<std::string> unsafeNames() {
  std::vector<std::string> out;
  for (const auto& r : kRules) out.push_back(r.name);
  out.push_back(kAllowHbaSuperuser);
  out.push_back(kAllowHbaTrust);
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::set<std::string>> parseAllowList(const std::vector<std::string>& names) {
  std::set<std::string> out;
  const auto known = unsafeNames();
  for (const auto& n : names) {
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      std::string all;
      for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
      return Error{"'" + n + "' is not something the cluster configuration needs allowing (those are: " + all + ")"};
    }
    out.insert(n);
  }
  return out;
}

std::vector<UnsafePart> unsafeParts(const ClusterConfig& config, const std::string& superuser) {
  std::vector<UnsafePart> out;
  for (const auto& [k, v] : config.settings) {
    if (const Rule* r = ruleFor(k); r && r->refuses(v)) out.push_back({k, k + " = '" + v + "'", r->why});
  }
  for (const auto& line : config.hba) addHbaParts(line, superuser, &out);
  return out;
}

Result<bool> checkAllowed(const ClusterConfig& config, const HostAllowance& host) {
  std::string refused;
  for (const auto& p : unsafeParts(config, host.superuser)) {
    if (host.allowUnsafe.count(p.name)) continue;
    refused += std::string(refused.empty() ? "" : "; ") + p.what + " " + p.why + ": refused unless every host's " +
               "dugong.yaml allows it (clusterConfig.allowUnsafe: [" + p.name + "])";
  }
  if (refused.empty()) return true;
  return Error{refused};
}

}  // namespace dugong::pg
