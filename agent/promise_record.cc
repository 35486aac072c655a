#include "agent/promise_record.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "driver/failsafe.h"

namespace dugong::agent {
namespace {

Error ioError(const std::string& what, const std::string& path) {
  return Error{what + " " + path + ": " + std::strerror(errno)};
}

std::string parentOf(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

BootClock BootClock::now() {
  BootClock c;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, c.bootId);
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  c.ms = int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
  return c;
}

Result<bool> PromiseRecord::save(int64_t remainingMs, const BootClock& now) const {
  const nlohmann::json j = {{"bootId", now.bootId},
                            {"recordedAtMs", now.ms},
                            {"promisedUntilMs", now.ms + std::max<int64_t>(remainingMs, 0)}};
  const std::string text = j.dump(2) + "\n";
  const std::string tmp = path_ + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ioError("cannot create", tmp);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
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
  if (dir < 0) return ioError("cannot open the directory of", path_);
  ok = ::fsync(dir) == 0;
  savedErrno = errno;
  ::close(dir);
  errno = savedErrno;
  if (!ok) return ioError("cannot sync the directory of", path_);
  return true;
}

Result<std::optional<int64_t>> PromiseRecord::remainingAt(const BootClock& now) const {
  std::ifstream in(path_);
  if (!in) {
    if (errno == ENOENT) return std::optional<int64_t>{};
    return ioError("cannot read", path_);
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const auto j = nlohmann::json::parse(buf.str(), nullptr, false);
  if (!j.is_object() || !j.contains("bootId") || !j["bootId"].is_string() || !j.contains("recordedAtMs") ||
      !j["recordedAtMs"].is_number_integer() || !j.contains("promisedUntilMs") ||
      !j["promisedUntilMs"].is_number_integer()) {
    return Error{path_ + " is not a dugong promise record (bootId, recordedAtMs, promisedUntilMs)"};
  }
  const int64_t until = j["promisedUntilMs"].get<int64_t>();
  // Another boot: the time since is unknown, but not negative.
  const int64_t from = j["bootId"].get<std::string>() == now.bootId ? now.ms : j["recordedAtMs"].get<int64_t>();
  return std::optional<int64_t>{std::clamp<int64_t>(until - from, 0, kFailsafeMaxDurationMs)};
}

}  // namespace dugong::agent
