#include "tools/adm/rebuild_progress.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace dugong::adm {
namespace {

std::map<pid_t, pid_t> parents() {
  std::map<pid_t, pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/stat");
    std::string stat;
    std::getline(in, stat);
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    long ppid = 0;
    if (rest >> state >> ppid) out[static_cast<pid_t>(pid)] = static_cast<pid_t>(ppid);
  }
  ::closedir(d);
  return out;
}

uint64_t wchar(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/io");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "wchar:") return value;
  }
  return 0;
}

}  // namespace

uint64_t bytesWrittenByDescendants(pid_t ancestor) {
  const auto tree = parents();
  uint64_t total = 0;
  for (const auto& [pid, ppid] : tree) {
    for (pid_t p = ppid; p > 1;) {
      if (p == ancestor) {
        total += wchar(pid);
        break;
      }
      auto it = tree.find(p);
      if (it == tree.end()) break;
      p = it->second;
    }
  }
  return total;
}

std::string humanBytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

RebuildProgress::RebuildProgress(std::ostream& out, bool enabled) : out_(out) {
  if (enabled) thread_ = std::thread([this] { run(); });
}

RebuildProgress::~RebuildProgress() {
  stop_ = true;
  if (thread_.joinable()) {
    thread_.join();
    out_ << "\n" << std::flush;
  }
}

// Descendants come and go (pg_ctl, pg_controldata, ...) and take their counts with
// them: a drop of the live total is counted as done, so the figure never goes back.
void RebuildProgress::run() {
  const auto started = std::chrono::steady_clock::now();
  uint64_t last = 0;
  auto lastAt = started;
  uint64_t done = 0;  // bytes of writers that have exited
  uint64_t previousLive = 0;
  while (!stop_) {
    for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const uint64_t live = bytesWrittenByDescendants(::getpid());
    if (live < previousLive) done += previousLive - live;  // a writer exited
    previousLive = live;
    const uint64_t total = done + live;
    const auto now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - lastAt).count();
    const double rate = secs > 0 && total >= last ? static_cast<double>(total - last) / secs : 0;
    last = total;
    lastAt = now;
    const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(now - started).count();
    out_ << "\r" << humanBytes(static_cast<double>(total)) << " written, " << humanBytes(rate) << "/s, " << elapsed
         << " s elapsed   " << std::flush;
  }
}

}  // namespace dugong::adm
