#include "agent/watchdog.h"
#include "agent/suspend_clock.h"

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

#include "agent/logging.h"

namespace dugong::agent {

struct Watchdog::Shared {
  std::atomic<int> primary{0};   // armed: this peer is the primary
  std::atomic<int> disarmed{0};  // the agent stops: never fire again
  // When the agent lost its ZooKeeper connection as the primary (steady clock, ms);
  // 0: connected.
  std::atomic<int64_t> connectionLostMs{0};
  // The primary's lease's end (CLOCK_BOOTTIME, ms: the driver's clock); 0: none yet.
  std::atomic<int64_t> leaseDeadlineMs{0};
  // The agent loop's last beat (steady clock, ms); 0: none yet, or the loop has ended.
  std::atomic<int64_t> beatMs{0};
};

// How often an unarmed watchdog, or one with no lease's end, looks again.
constexpr int64_t kWatchForArmingMs = 100;

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

// The state letter of the process whose /proc/<pid>/stat is open as `fd` (R, S, D, T,
// t, Z...), the one after the command name; '?' if it cannot be read. Read again through
// the same descriptor each time (no open, no allocation).
char processState(int fd) {
  if (fd < 0) return '?';
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return '?';
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  return close != nullptr && close + 2 < buf + n ? close[2] : '?';
}

// Stopped by a signal, or by a debugger.
bool stopped(int fd) {
  const char state = processState(fd);
  return state == 'T' || state == 't';
}

long postmasterPid(const std::string& dataDir) {
  long pid = 0;
  std::ifstream(dataDir + "/postmaster.pid") >> pid;
  return pid;
}

// SIGQUIT (an immediate shutdown: no checkpoint removes the WAL a rewind of this peer would
// read, decision 0058) to the postmaster named in postmaster.pid; false if none.
bool signalPostmaster(const std::string& dataDir) {
  const long pid = postmasterPid(dataDir);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), SIGQUIT) == 0;
}

// A postmaster runs and it is not a standby (no standby.signal or recovery.signal): it
// may acknowledge commits (as agent/leave_command.cc judges before a session ends).
bool postgresMayWrite(const std::string& dataDir) {
  const long pid = postmasterPid(dataDir);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) == 0 &&
         ::access((dataDir + "/standby.signal").c_str(), F_OK) != 0 &&
         ::access((dataDir + "/recovery.signal").c_str(), F_OK) != 0;
}

// The agent's loop has been silent for `silentMs` while its process runs (state
// `state`): it keeps its ZooKeeper session (the client's own threads answer the pings)
// and does nothing. A postgres that may acknowledge commits is shut down first, as for a
// stopped agent; then the agent is killed, so that its client stops pinging and the
// session expires. Its kept session is removed so that its next run (systemd starts it
// again) opens a new session instead of holding the old one again: once before the kill,
// so that no run started on the agent's death can find it, and once after, since a loop
// that woke in between could have saved it again. The log line comes last: it may have
// to wait (logWithoutBlocking).
void endHungAgent(const std::string& dataDir, const std::string& sessionFile, pid_t agent, int64_t silentMs,
                  char state, bool primary) {
  const long postmaster = postmasterPid(dataDir);
  const bool running = postmaster > 0 && ::kill(static_cast<pid_t>(postmaster), 0) == 0;
  const bool mayWrite = primary || postgresMayWrite(dataDir);
  const bool shutDown = mayWrite && signalPostmaster(dataDir);
  int removeError = 0;
  if (!sessionFile.empty() && ::unlink(sessionFile.c_str()) != 0) removeError = errno;
  const bool killed = ::kill(agent, SIGKILL) == 0;
  const int killError = killed ? 0 : errno;
  if (!sessionFile.empty() && ::unlink(sessionFile.c_str()) == 0) removeError = 0;
  const std::string postgres =
      shutDown    ? std::string("asked postgres for an immediate shutdown (") +
                     (primary ? "this peer is the primary" : "it is not a standby and may acknowledge commits") + ")"
      : !running  ? std::string("postgres is not running")
      : mayWrite  ? std::string("could not signal postgres")
                  : std::string("left postgres running (a standby)");
  const std::string session =
      sessionFile.empty()      ? std::string()
      : removeError == 0       ? ", removed its kept session " + sessionFile + " so that its next run opens a new one"
      : removeError == ENOENT  ? std::string(", it kept no session file")
                               : ", could not remove its kept session " + sessionFile + " (" +
                                    std::strerror(removeError) + "): a run started within the session timeout would "
                                    "hold the session again";
  spdlog::warn("watchdog: the agent's loop (pid {}, state {}) has not run for {} ms while its process runs, holding "
               "its ZooKeeper session and doing nothing: {}; {}{}, so that its session expires and the other peers "
               "go on without it",
               static_cast<int>(agent), state, silentMs, postgres,
               killed ? std::string("killed the agent (SIGKILL)")
                      : std::string("could not kill the agent: ") + std::strerror(killError),
               session);
  spdlog::default_logger()->flush();
}

// The child's whole life: no threads; it only reads the shared page, /proc and the
// postmaster's pid file, signals, removes the kept session of a hung agent, and logs
// (never blocking: logWithoutBlocking). Forked before the agent starts any thread, so no
// lock (malloc's, the logger's) can be held by a thread the child does not have.
// It outlives an agent that dies while armed (killed, out of memory): that agent's
// session expires as a stopped one's does, and its postgres runs on. It ends once it has
// acted on the death, or at once if it was not armed.
[[noreturn]] void watch(const Watchdog::Shared& shared, const std::string& dataDir, const std::string& sessionFile,
                        int64_t limitMs, pid_t parent) {
  const int fd = ::open(("/proc/" + std::to_string(parent) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  // Every half limit while the peer is the primary: a stop is acted on between a half and
  // a whole limit after it began. Otherwise rarely: being armed is what it waits for then.
  // (Each wake-up costs this host about 0.01 % of a core a second.)
  // While the connection is lost as primary, every twelfth of limit (a 24th of the session
  // timeout): the deadline is then near (watchdogDeadlineMs).
  // And, while the loop beats, every quarter limit and at the last sign of life + limit,
  // when a loop that has stopped beating would count as hung. The quarter: a stop long
  // enough to matter (a loop silent for a limit, then continued) is always seen, so that
  // an agent continued after a stop is not taken for a hung one before its first beat.
  const int64_t pollMs = std::max<int64_t>(limitMs / 2, 10);
  const int64_t lostPollMs = std::max<int64_t>(limitMs / 12, 10);
  int64_t stoppedSince = 0;             // when the agent was first seen stopped or gone; 0: not
  bool fired = false;                   // once per stop
  int64_t hungActedOn = 0;              // the last beat of a loop acted on as hung
  int64_t seenStoppedMs = 0;            // when the agent was last seen stopped
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
      sleepMs = std::clamp<int64_t>(leaseEnd - bootTimeMs(), 1, sleepMs);  // wakes at the lease's end
    } else {
      // Not armed, or no lease's end yet: one may come at any moment (the primary's apply
      // arms it, its first lease follows), and a sleep of the whole limit would act on it
      // that much late (seen under load: 60 s late in a test).
      sleepMs = std::min<int64_t>(sleepMs, kWatchForArmingMs);
    }
    const int64_t beat = shared.beatMs.load();
    if (beat > 0 && beat != hungActedOn) {
      const int64_t hungAt = std::max(beat, seenStoppedMs) + limitMs;
      sleepMs = std::clamp<int64_t>(hungAt - steadyMs(), 1, std::min(sleepMs, std::max<int64_t>(limitMs / 4, 10)));
    }
    ::usleep(static_cast<useconds_t>(sleepMs * 1000));
    spdlog::default_logger()->flush();  // lines a full stderr held back
    if (armed()) {
      const int64_t end = shared.leaseDeadlineMs.load();
      if (end > 0 && end != leaseActedOn && bootTimeMs() >= end) {  // the driver's clock, which counts suspends
        leaseActedOn = end;
        const bool sent = signalPostmaster(dataDir);
        spdlog::warn("watchdog: the primary's lease ended {} ms ago with no newer one from the agent (pid {}): {}, "
                     "before its ZooKeeper session can expire on the leader and another peer take over",
                     bootTimeMs() - end, static_cast<int>(parent),
                     sent ? "asked postgres for an immediate shutdown" : "postgres is not running");
        spdlog::default_logger()->flush();
      }
    }
    const bool gone = ::getppid() != parent;
    if (gone && (!armed() || fired || hungActedOn != 0)) {
      spdlog::default_logger()->flush();
      ::_exit(0);
    }
    // A loop silent for `limit` while the process runs (neither stopped nor gone, nor
    // seen stopped within that limit): hung.
    const int64_t last = shared.beatMs.load();
    if (!gone && last > 0 && last != hungActedOn) {
      const char state = processState(fd);
      const int64_t now = steadyMs();
      if (state == 'T' || state == 't') {
        seenStoppedMs = now;
      } else if (now - std::max(last, seenStoppedMs) >= limitMs) {
        hungActedOn = last;
        endHungAgent(dataDir, sessionFile, parent, now - last, state, armed());
        continue;
      }
    }
    if (!armed() || (!gone && !stopped(fd))) {
      stoppedSince = 0;
      fired = false;
      continue;
    }
    const int64_t now = steadyMs();
    if (stoppedSince == 0) stoppedSince = now;
    if (fired || now < watchdogDeadlineMs(stoppedSince, pollMs, limitMs, lostAt())) continue;
    // It may have stopped (or died) up to one poll before it was seen so.
    const int64_t silent = now - stoppedSince + pollMs;
    fired = true;
    const long pid = postmasterPid(dataDir);
    const bool sent = signalPostmaster(dataDir);
    // The agent's logger, as set up before the fork (text or JSON, on its stderr).
    const auto lost = lostAt();
    spdlog::warn("watchdog: the agent (pid {}) has been {} for about {} ms while this peer is the primary{}: {}, "
                 "so that it acknowledges no commit once its ZooKeeper session can expire and another peer take over",
                 static_cast<int>(parent), gone ? "gone" : "stopped", silent,
                 lost ? ", its ZooKeeper connection lost " + std::to_string(now - *lost) + " ms ago" : std::string(),
                 sent ? "asked postgres for an immediate shutdown"
                      : (pid > 0 ? "could not signal postgres" : "postgres is not running"));
    spdlog::default_logger()->flush();
  }
}

}  // namespace

Result<std::unique_ptr<Watchdog>> Watchdog::start(const std::string& dataDir, std::chrono::milliseconds limit,
                                                  std::string sessionFile) {
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
    // It shares the agent's stderr, which may be what hangs the agent: its lines never
    // wait there, and a reader that went away costs it no SIGPIPE.
    ::signal(SIGPIPE, SIG_IGN);
    logWithoutBlocking();
    watch(*shared, dataDir, sessionFile, limit.count(), parent);
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

void Watchdog::beat() { shared_->beatMs = std::max<int64_t>(steadyMs(), 1); }

void Watchdog::endBeats() { shared_->beatMs = 0; }

void Watchdog::disarm() { shared_->disarmed = 1; }

void Watchdog::setConnectionLost(bool lost) { shared_->connectionLostMs = lost ? std::max<int64_t>(steadyMs(), 1) : 0; }

}  // namespace dugong::agent
