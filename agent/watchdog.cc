#include "agent/watchdog.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <spdlog/spdlog.h>

namespace dugong::agent {

struct Watchdog::Shared {
  std::atomic<int64_t> beatMs{0};   // CLOCK_MONOTONIC of the agent's last beat
  std::atomic<int> primary{0};      // armed: the agent runs as a primary
  std::atomic<int> disarmed{0};     // the agent stops: never fire again
};

namespace {

int64_t monotonicMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// The child's whole life: no threads; it only reads the shared page and the postmaster's
// pid file, signals, and logs. Forked before the agent starts any thread, so no lock
// (malloc's, the logger's) can be held by a thread the child does not have.
[[noreturn]] void watch(std::atomic<int64_t>& beat, std::atomic<int>& primary,
                        std::atomic<int>& disarmed, const std::string& dataDir, int64_t limitMs, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(0);
  int64_t firedAtBeat = -1;
  for (;;) {
    ::usleep(50 * 1000);
    if (::getppid() != parent) ::_exit(0);
    const int64_t last = beat.load();
    if (disarmed.load() != 0 || primary.load() == 0 || last == firedAtBeat) continue;
    const int64_t silent = monotonicMs() - last;
    if (silent <= limitMs) continue;
    firedAtBeat = last;
    long pid = 0;
    std::ifstream(dataDir + "/postmaster.pid") >> pid;
    const bool sent = pid > 0 && ::kill(static_cast<pid_t>(pid), SIGINT) == 0;
    // The agent's logger, as set up before the fork (text or JSON, on its stderr).
    spdlog::warn("watchdog: the agent (pid {}) has not run for {} ms while this peer is the primary (frozen or "
                 "hung): {}, so that it acknowledges no commit once its ZooKeeper session can expire and another "
                 "peer take over",
                 static_cast<int>(parent), silent,
                 sent ? "asked postgres for a fast shutdown"
                      : (pid > 0 ? "could not signal postgres" : "postgres is not running"));
    spdlog::default_logger()->flush();
  }
}

}  // namespace

Result<std::unique_ptr<Watchdog>> Watchdog::start(const std::string& dataDir, std::chrono::milliseconds limit) {
  void* page = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return Error{std::string("watchdog: mmap: ") + std::strerror(errno)};
  auto* shared = new (page) Shared();
  shared->beatMs = monotonicMs();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::munmap(page, sizeof(Shared));
    return Error{std::string("watchdog: fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    watch(shared->beatMs, shared->primary, shared->disarmed, dataDir, limit.count(), parent);
  }
  return std::unique_ptr<Watchdog>(new Watchdog(shared, pid, limit));
}

Watchdog::~Watchdog() {
  disarm();
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  ::munmap(shared_, sizeof(Shared));
}

void Watchdog::beat(bool primary) {
  shared_->beatMs = monotonicMs();
  shared_->primary = primary ? 1 : 0;
}

void Watchdog::disarm() { shared_->disarmed = 1; }

}  // namespace dugong::agent
