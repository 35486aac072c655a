#include "agent/process_stamp.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace dugong::agent {

std::string ProcessStamp::text() const { return std::to_string(pid) + " " + std::to_string(startTime); }

std::optional<ProcessStamp> processStamp(int pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto open = stat.find('(');
  const auto close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  // After the name: state (field 3), then fields 4..22; the start time is the 20th of them.
  std::istringstream rest(stat.substr(close + 1));
  std::string state, field;
  if (!(rest >> state) || state == "Z" || state == "X") return std::nullopt;
  for (int i = 4; i < 22; ++i) {
    if (!(rest >> field)) return std::nullopt;
  }
  ProcessStamp p;
  p.pid = pid;
  p.name = stat.substr(open + 1, close - open - 1);
  if (!(rest >> p.startTime)) return std::nullopt;
  return p;
}

std::optional<ProcessStamp> parseProcessStamp(const std::string& text) {
  std::istringstream in(text);
  ProcessStamp p;
  std::string extra;
  if (!(in >> p.pid >> p.startTime) || p.pid <= 0 || (in >> extra)) return std::nullopt;
  return p;
}

bool endProcess(const ProcessStamp& p, int signal, std::chrono::milliseconds wait) {
  auto now = processStamp(p.pid);
  if (!now || !(*now == p)) return true;
  if (::kill(p.pid, signal) != 0 && errno == ESRCH) return true;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    now = processStamp(p.pid);
    if (!now || !(*now == p)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Result<bool> writeProcessRecord(const std::string& path, const ProcessStamp& p) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Error{"cannot write " + tmp + ": " + std::strerror(errno)};
  const std::string line = p.text() + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  const int writeErrno = errno;
  ::close(fd);
  if (!written) return Error{"cannot write " + tmp + ": " + std::strerror(writeErrno)};
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Error{"cannot rename " + tmp + " to " + path + ": " + std::strerror(errno)};
  }
  return true;
}

Result<std::optional<ProcessStamp>> readProcessRecord(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) return std::optional<ProcessStamp>();
  std::ifstream in(path);
  if (!in) return Error{"cannot read " + path};
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto p = parseProcessStamp(text);
  if (!p) return Error{path + ": expected \"<pid> <start time>\", found \"" + text + "\""};
  return std::optional<ProcessStamp>(*p);
}

}  // namespace dugong::agent
