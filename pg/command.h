// Running an external program: as another OS user, without a shell, with a deadline,
// its output captured (and logged by the caller).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace dugong::pg {

struct CommandSpec {
  std::vector<std::string> argv;  // argv[0] is the program's path
  std::string runAsUser;          // empty: run as ourselves
  std::map<std::string, std::string> env;  // added to a minimal environment (PATH, HOME, LANG=C)
  std::string workDir = "/";
  std::chrono::milliseconds timeout{60000};
  size_t maxOutput = 1 << 20;     // output kept: the last bytes up to this size
};

struct CommandResult {
  bool started = false;   // false: could not fork/exec or look up the user (see `error`)
  bool timedOut = false;  // killed (with its process group) at the deadline
  int exitCode = -1;      // when it exited normally
  int signal = 0;         // when killed by a signal
  std::string output;     // stdout and stderr interleaved
  std::string error;      // why it did not start
  std::chrono::milliseconds elapsed{0};

  bool ok() const { return started && !timedOut && signal == 0 && exitCode == 0; }
  // "exit 1", "killed by signal 9", "timed out after 5000 ms", "not started: ..."
  std::string describe() const;
};

// Blocks until the program exits or the deadline passes. The child runs in its own
// process group; at the deadline the group is killed with SIGKILL. The user's
// uid/gid/supplementary groups are set before exec. Thread-safe.
CommandResult runCommand(const CommandSpec& spec);

// For logs: the argv joined with spaces, each argument quoted when needed.
std::string describeArgv(const std::vector<std::string>& argv);

}  // namespace dugong::pg
