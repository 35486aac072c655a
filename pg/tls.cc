#include "pg/tls.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>

namespace dugong::pg {
namespace {

constexpr std::array<const char*, 6> kModes = {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"};

Result<bool> readableFile(const std::string& what, const std::string& path) {
  if (path.empty() || path[0] != '/') return Error{what + " '" + path + "' must be an absolute path"};
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return Error{what + " " + path + " is not a file"};
  if (::access(path.c_str(), R_OK) != 0) return Error{what + " " + path + " is not readable"};
  return true;
}

Result<bool> privateKey(const std::string& what, const std::string& path) {
  if (auto r = readableFile(what, path); !r) return r;
  struct stat st{};
  ::stat(path.c_str(), &st);
  const mode_t allowed = st.st_uid == 0 ? 0740 : 0700;
  if ((st.st_mode & 0777 & ~allowed) != 0) {
    return Error{what + " " + path + " is readable by others: postgres and libpq refuse a key that is not 0600 "
                 "(or 0640 owned by root)"};
  }
  return true;
}

}  // namespace

Result<bool> validateTls(const PgTls& t) {
  if (std::find(kModes.begin(), kModes.end(), t.sslmode) == kModes.end()) {
    return Error{"tls.sslmode '" + t.sslmode + "' is not one of disable, allow, prefer, require, verify-ca, verify-full"};
  }
  if (t.certFile.empty() != t.keyFile.empty()) return Error{"tls.certFile and tls.keyFile go together: set both"};
  if (!t.caFile.empty() && t.certFile.empty()) return Error{"tls.caFile needs tls.certFile and tls.keyFile"};
  if (t.hostsslOnly && t.certFile.empty()) {
    return Error{"tls.hostsslOnly needs tls.certFile and tls.keyFile: postgres cannot accept TLS without them"};
  }
  if (t.hostsslOnly && (t.sslmode == "disable" || t.sslmode == "allow")) {
    return Error{"tls.hostsslOnly refuses connections without TLS, and tls.sslmode " + t.sslmode +
                 " does not try TLS first: use prefer or stronger"};
  }
  if ((t.sslmode == "verify-ca" || t.sslmode == "verify-full") && t.rootCert().empty()) {
    return Error{"tls.sslmode " + t.sslmode + " verifies the server's certificate: set tls.rootCertFile (or tls.caFile)"};
  }
  if (t.clientCertFile.empty() != t.clientKeyFile.empty()) {
    return Error{"tls.clientCertFile and tls.clientKeyFile go together: set both"};
  }
  for (const auto& [what, path] : std::array<std::pair<const char*, const std::string*>, 4>{
           {{"tls.certFile", &t.certFile}, {"tls.caFile", &t.caFile}, {"tls.rootCertFile", &t.rootCertFile},
            {"tls.clientCertFile", &t.clientCertFile}}}) {
    if (!path->empty()) {
      if (auto r = readableFile(what, *path); !r) return r;
    }
  }
  if (!t.keyFile.empty()) {
    if (auto r = privateKey("tls.keyFile", t.keyFile); !r) return r;
  }
  if (!t.clientKeyFile.empty()) {
    if (auto r = privateKey("tls.clientKeyFile", t.clientKeyFile); !r) return r;
  }
  return true;
}

std::map<std::string, std::string> clientTlsParams(const PgTls& t) {
  std::map<std::string, std::string> p = {{"sslmode", t.sslmode}};
  if (!t.rootCert().empty()) p["sslrootcert"] = t.rootCert();
  if (!t.clientCertFile.empty()) {
    p["sslcert"] = t.clientCertFile;
    p["sslkey"] = t.clientKeyFile;
  }
  return p;
}

std::vector<std::pair<std::string, std::string>> serverTlsSettings(const PgTls& t) {
  if (!t.serverTls()) return {};
  std::vector<std::pair<std::string, std::string>> s = {
      {"ssl", "on"}, {"ssl_cert_file", t.certFile}, {"ssl_key_file", t.keyFile}};
  if (!t.caFile.empty()) s.emplace_back("ssl_ca_file", t.caFile);
  return s;
}

std::string hbaTcpType(const PgTls& t) { return t.hostsslOnly ? "hostssl" : "host"; }

}  // namespace dugong::pg
