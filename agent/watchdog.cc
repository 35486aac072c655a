#include "agent/watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include <spdlog/spdlog.h>

namespace dugong::agent {

struct Watchdog::Shared {
  std::atomic<int> primary{0};   // armed: this peer is the primary
  std::atomic<int> disarmed{0};  // the agent stops: never fire again
  // When the agent lost its ZooKeeper connection as the primary (steady clock, ms);
  // 0: connected.
  std::atomic<int64_t> connectionLostMs{0};
  // The primary's lease's end (steady clock, ms); 0: none yet.
  std::atomic<int64_t> leaseDeadlineMs{0};
};

int64_t watchdogDeadlineMs(int64_t seenStoppedMs, int64_t pollMs, int64_t limitMs,
                           std::optional<int64_t> connectionLostMs) {
  const int64_t afterStop = seenStoppedMs - pollMs + limitMs;
  return connectionLostMs ? std::min(afterStop, *connectionLostMs + limitMs / 3) : afterStop;
}

namespace {

int64_t steadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Whether the process whose /proc/<pid>/stat is open as `fd` is stopped (by a signal, or
// by a debugger): the state letter after the command name. Read again through the same
// descriptor each time (no open, no allocation).
bool stopped(int fd) {
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  return close != nullptr && close + 2 < buf + n && (close[2] == 'T' || close[2] == 't');
}

// SIGINT (a fast shutdown) to the postmaster named in postmaster.pid; false if none.
bool signalPostmaster(const std::string& dataDir) {
  long pid = 0;
  std::ifstream(dataDir + "/postmaster.pid") >> pid;
  return pid > 0 && ::kill(static_cast<pid_t>(pid), SIGINT) == 0;
}

// The child's whole life: no threads; it only reads the shared page, /proc and the
// postmaster's pid file, signals, and logs. Forked before the agent starts any thread,
// so no lock (malloc's, the logger's) can be held by a thread the child does not have.
// It outlives an agent that dies while armed (killed, out of memory): that agent's
// session expires as a stopped one's does, and its postgres runs on. It ends once it has
// acted on the death, or at once if it was not armed.
[[noreturn]] void watch(const Watchdog::Shared& shared, const std::string& dataDir, int64_t limitMs, pid_t parent) {
  const int fd = ::open(("/proc/" + std::to_string(parent) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  // Every half limit while the peer is the primary: a stop is acted on between a half and
  // a whole limit after it began. Otherwise rarely: being armed is what it waits for then.
  // (Each wake-up costs this host about 0.01 % of a core a second.)
  // While the connection is lost as primary, every twelfth of limit (a 24th of the session
  // timeout): the deadline is then near (watchdogDeadlineMs).
  const int64_t pollMs = std::max<int64_t>(limitMs / 2, 10);
  const int64_t lostPollMs = std::max<int64_t>(limitMs / 12, 10);
  std::optional<int64_t> stoppedSince;  // when the agent was first seen stopped or gone
  bool fired = false;                   // once per stop
  auto armed = [&] { return shared.disarmed.load() == 0 && shared.primary.load() != 0; };
  auto lostAt = [&]() -> std::optional<int64_t> {
    const int64_t at = shared.connectionLostMs.load();
    return at > 0 ? std::optional<int64_t>(at) : std::nullopt;
  };
  int64_t leaseActedOn = 0;  // the lease's end last acted on
  for (;;) {
    int64_t sleepMs = !armed() ? std::max<int64_t>(limitMs, 1000) : lostAt() ? lostPollMs : pollMs;
    const int64_t leaseEnd = shared.leaseDeadlineMs.load();
    if (armed() && leaseEnd > 0 && leaseEnd != leaseActedOn) {
      sleepMs = std::clamp<int64_t>(leaseEnd - steadyMs(), 1, sleepMs);  // wakes at the lease's end
    }
    ::usleep(static_cast<useconds_t>(sleepMs * 1000));
    if (armed()) {
      const int64_t end = shared.leaseDeadlineMs.load();
      if (end > 0 && end != leaseActedOn && steadyMs() >= end) {
        leaseActedOn = end;
        const bool sent = signalPostmaster(dataDir);
        spdlog::warn("watchdog: the primary's lease ended {} ms ago with no newer one from the agent (pid {}): {}, "
                     "before its ZooKeeper session can expire on the leader and another peer take over",
                     steadyMs() - end, static_cast<int>(parent),
                     sent ? "asked postgres for a fast shutdown" : "postgres is not running");
        spdlog::default_logger()->flush();
      }
    }
    const bool gone = ::getppid() != parent;
    if (gone && (!armed() || fired)) ::_exit(0);
    if (!armed() || (!gone && (fd < 0 || !stopped(fd)))) {
      stoppedSince.reset();
      fired = false;
      continue;
    }
    const int64_t now = steadyMs();
    if (!stoppedSince) stoppedSince = now;
    if (fired || now < watchdogDeadlineMs(*stoppedSince, pollMs, limitMs, lostAt())) continue;
    // It may have stopped (or died) up to one poll before it was seen so.
    const int64_t silent = now - *stoppedSince + pollMs;
    fired = true;
    long pid = 0;
    std::ifstream(dataDir + "/postmaster.pid") >> pid;
    const bool sent = signalPostmaster(dataDir);
    // The agent's logger, as set up before the fork (text or JSON, on its stderr).
    const auto lost = lostAt();
    spdlog::warn("watchdog: the agent (pid {}) has been {} for about {} ms while this peer is the primary{}: {}, "
                 "so that it acknowledges no commit once its ZooKeeper session can expire and another peer take over",
                 static_cast<int>(parent), gone ? "gone" : "stopped", silent,
                 lost ? ", its ZooKeeper connection lost " + std::to_string(now - *lost) + " ms ago" : std::string(),
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
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::munmap(page, sizeof(Shared));
    return Error{std::string("watchdog: fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    // A process group and session of its own, and a name of its own: a stop of the agent's
    // process group (kill -STOP -<pgid>, Ctrl-Z) or a `killall dugong` leaves it running.
    ::setsid();
    ::prctl(PR_SET_NAME, kWatchdogProcessName, 0, 0, 0);
    watch(*shared, dataDir, limit.count(), parent);
  }
  return std::unique_ptr<Watchdog>(new Watchdog(shared, pid));
}

Watchdog::~Watchdog() {
  if (leftArmed_) return;  // it outlives this process, with the shared page
  disarm();
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  ::munmap(shared_, sizeof(Shared));
}

void Watchdog::setPrimary(bool primary) { shared_->primary = primary ? 1 : 0; }

void Watchdog::setLeaseDeadline(int64_t deadlineMs) { shared_->leaseDeadlineMs = std::max<int64_t>(deadlineMs, 1); }

void Watchdog::disarm() { shared_->disarmed = 1; }

void Watchdog::setConnectionLost(bool lost) { shared_->connectionLostMs = lost ? std::max<int64_t>(steadyMs(), 1) : 0; }

}  // namespace dugong::agent
