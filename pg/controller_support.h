// Helpers the controller's files share (pg/controller*.cc): reading files and server log
// tails, the log of a program's output, and the outcomes of an apply. Internal to pg/.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "pg/command.h"
#include "statemachine/event.h"
#include "statemachine/result.h"

namespace dugong::pg {

// The application_name of the agent's own connections to its postgres (the Unix
// socket): the sessions stopWrites does not terminate.
inline constexpr const char* kAgentApplicationName = "dugong-agent";

// The text the incomplete marker begins with while pg_rewind changes the data directory
// (which then still holds this peer's own data, not a copy).
inline constexpr const char* kRewindMarker = "rewind";

// Sets an in-flight flag for the scope it lives in (`value` false: leaves it unset).
class FlagInFlight {
 public:
  explicit FlagInFlight(std::atomic<bool>& flag, bool value = true) : flag_(flag) { flag_ = value; }
  ~FlagInFlight() { flag_ = false; }
  FlagInFlight(const FlagInFlight&) = delete;
  FlagInFlight& operator=(const FlagInFlight&) = delete;

 private:
  std::atomic<bool>& flag_;
};

std::string readFile(const std::string& path);
// A program's run for the log: one line at info when it succeeded (its output at
// debug), its output with the warning when it failed.
void logOutput(const std::string& what, const CommandResult& r);
std::string lastLines(const std::string& text, int n);
// The whole line of `text` around the last occurrence of `what`, if any.
std::optional<std::string> lineWith(const std::string& text, const std::string& what);
// The line of a standby's server log tail that says why it cannot follow its upstream.
std::optional<std::string> cannotFollowEvidence(const std::string& logTail);
// Milliseconds since `start`, for the log.
long long msSince(std::chrono::steady_clock::time_point start);
std::string oneLine(std::string s);
Result<bool> portFree(const std::string& host, int port);
// Whether the first line of a postgres lock file (postmaster.pid, or the socket's
// .s.PGSQL.<port>.lock) names a live postmaster. The pid may have been reused: check that
// it is a postgres process, and not a zombie (a killed postmaster whose parent has not
// reaped it yet, which postgres itself would take for a running server).
bool lockFileHeldByLivePostmaster(const std::string& lockFile);
// The pid in `dataDir`'s postmaster.pid, while it names a live postmaster.
std::optional<pid_t> livePostmasterPid(const std::string& dataDir);
// A process stopped by a signal or a debugger (state T or t): it acts on no signal but
// SIGKILL (and SIGCONT).
bool processStopped(pid_t pid);

// What the operator runs when data the cluster may need would be replaced.
extern const char kDiscardCommand[];
// Identifies this run of postgres: its start time in microseconds.
extern const char* const kInstanceSql;

// The outcomes of an apply.
PgConfigApplied failed(std::string error, bool online);
// Data the cluster may need would be replaced: only an operator can resolve it.
PgConfigApplied refused(std::string error, bool online);
PgConfigApplied succeeded(bool online);

}  // namespace dugong::pg
