#include "agent/session_file.h"

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

std::string parentOf(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

Error ioError(const std::string& what, const std::string& path) {
  return Error{what + " " + path + ": " + std::strerror(errno)};
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
    return ioError("cannot read", path_);
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
  const std::string text = j.dump(2) + "\n";
  const std::string tmp = path_ + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ioError("cannot create", tmp);
  bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  int savedErrno = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    errno = savedErrno;
    return ioError("cannot write", tmp);
  }
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    Error e = ioError("cannot rename " + tmp + " to", path_);
    ::unlink(tmp.c_str());
    return e;
  }
  int dir = ::open(parentOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return true;
}

Result<bool> SessionFile::remove() const {
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) return ioError("cannot remove", path_);
  return true;
}

}  // namespace dugong::agent
