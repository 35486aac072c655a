#include "agent/session_file.h"

#include "agent/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace dugong::agent {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::optional<std::string> unhex(const std::string& text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2) {
    auto v = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = v(text[i]), lo = v(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

std::string firstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

SessionOwner SessionOwner::current(const std::string& peerId, const std::string& zkRoot, const std::string& dataDir) {
  SessionOwner o;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) o.host = host;
  o.machineId = firstLine("/etc/machine-id");
  o.peerId = peerId;
  o.zkRoot = zkRoot;
  o.dataDir = dataDir;
  return o;
}

std::string SessionOwner::differences(const SessionOwner& other) const {
  std::string out;
  auto check = [&](const char* what, const std::string& mine, const std::string& theirs) {
    if (mine != theirs) out += (out.empty() ? "" : ", ") + std::string(what) + " \"" + theirs + "\" (here \"" + mine + "\")";
  };
  check("host", host, other.host);
  check("machine id", machineId, other.machineId);
  check("peer", peerId, other.peerId);
  check("ZooKeeper root", zkRoot, other.zkRoot);
  check("data directory", dataDir, other.dataDir);
  return out;
}

Result<std::optional<zk::SessionCredentials>> SessionFile::load() const {
  std::ifstream in(path_);
  if (!in) {
    if (errno == ENOENT) return std::optional<zk::SessionCredentials>{};
    return fileError("cannot read", path_);
  }
  std::stringstream buf;
  buf << in.rdbuf();
  auto j = nlohmann::json::parse(buf.str(), nullptr, false);
  auto str = [&](const char* key) { return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : ""; };
  if (!j.is_object() || !j.contains("sessionId") || !j["sessionId"].is_number_integer()) {
    return Error{path_ + " is not a dugong session file (no sessionId)"};
  }
  auto password = unhex(str("password"));
  if (!password || password->size() != 16) return Error{path_ + ": the password is not 16 bytes in hex"};
  SessionOwner writer{str("host"), str("machineId"), str("peer"), str("zkRoot"), str("dataDir")};
  if (auto diff = owner_.differences(writer); !diff.empty()) {
    return Error{path_ + " was written by another agent: " + diff +
                 "; refusing to re-attach to its session (two agents must never share one)"};
  }
  return std::optional<zk::SessionCredentials>{zk::SessionCredentials{j["sessionId"].get<int64_t>(), *password}};
}

Result<bool> SessionFile::save(const zk::SessionCredentials& session) const {
  nlohmann::json j = {{"sessionId", session.sessionId}, {"password", hex(session.password)},
                      {"host", owner_.host},           {"machineId", owner_.machineId},
                      {"peer", owner_.peerId},         {"zkRoot", owner_.zkRoot},
                      {"dataDir", owner_.dataDir}};
  return writeFileDurably(path_, j.dump(2) + "\n");
}

Result<bool> SessionFile::remove() const {
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) return fileError("cannot remove", path_);
  return true;
}

}  // namespace dugong::agent
