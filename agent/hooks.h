// Operator hooks: executables the agent runs when something happens to this peer
// (hooks.onRoleChange: after postgres took a new role; hooks.onStart and
// hooks.onStop: when the agent has started, and when it stops). A hook never delays the HA
// path: the runner runs hooks one at a time, in the order they were asked for, on its
// own thread. Each is started without a shell (posix_spawn; stdin /dev/null; every
// inherited descriptor but stdout/stderr closed; in its own process group), killed
// with its group after the timeout, and its exit status and first bytes of output are
// logged. A failure is counted and shown (status()), never retried.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace dugong::agent {

struct HookCall {
  std::string name;                    // "onRoleChange", for logs and status
  std::string path;                    // absolute path of the executable
  std::vector<std::string> args;       // argv[1..]
  std::vector<std::string> env;        // "KEY=value", added to the agent's environment
};

struct HookOutcome {
  std::string name;
  std::vector<std::string> args;
  bool ok = false;
  std::optional<int> exitCode;         // when it exited
  std::optional<int> signal;           // when a signal ended it
  bool timedOut = false;
  std::string error;                   // it could not be started
  std::string output;                  // stdout and stderr, at most kMaxOutput bytes
  std::string describe() const;        // "exited with status 3", "killed after the 30 s timeout", ...
  nlohmann::json toJson() const;
};

struct HookStatus {
  uint64_t runs = 0, failures = 0;
  std::optional<HookOutcome> last;
  nlohmann::json toJson() const;
};

class HookRunner {
 public:
  static constexpr size_t kMaxOutput = 4096;
  explicit HookRunner(int timeoutSeconds);
  // Kills the hook running now (if any) and drops the queued ones.
  ~HookRunner();
  HookRunner(const HookRunner&) = delete;
  HookRunner& operator=(const HookRunner&) = delete;

  // Queues the call and returns at once. Thread-safe.
  void run(HookCall call);
  // Thread-safe.
  HookStatus status() const;
  // Blocks until every call queued so far has finished (the agent's onStop, tests).
  void drain();

 private:
  void work();
  HookOutcome execute(const HookCall& call);

  const int timeoutSeconds_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<HookCall> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  HookStatus status_;
  std::thread worker_;
};

}  // namespace dugong::agent
