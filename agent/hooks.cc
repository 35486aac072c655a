#include "agent/hooks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

extern char** environ;

namespace dugong::agent {
namespace {

constexpr int kPollMs = 100;

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += " " + a;
  return out;
}

}  // namespace

std::string HookOutcome::describe() const {
  if (!error.empty()) return "could not be started: " + error;
  if (timedOut) return "killed after the timeout";
  if (signal) return "ended by signal " + std::to_string(*signal);
  if (exitCode) return "exited with status " + std::to_string(*exitCode);
  return "unknown outcome";
}

nlohmann::json HookOutcome::toJson() const {
  return {{"name", name}, {"args", args},     {"ok", ok},
          {"status", describe()}, {"exitCode", exitCode ? nlohmann::json(*exitCode) : nlohmann::json()},
          {"timedOut", timedOut}, {"output", output}};
}

nlohmann::json HookStatus::toJson() const {
  return {{"runs", runs}, {"failures", failures}, {"last", last ? last->toJson() : nlohmann::json()}};
}

HookRunner::HookRunner(int timeoutSeconds) : timeoutSeconds_(timeoutSeconds), worker_([this] { work(); }) {}

HookRunner::~HookRunner() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  worker_.join();
}

void HookRunner::run(HookCall call) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    queue_.push_back(std::move(call));
  }
  cv_.notify_all();
}

HookStatus HookRunner::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

void HookRunner::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return stopping_ || (queue_.empty() && !busy_); });
}

void HookRunner::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    HookCall call = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    HookOutcome o = execute(call);
    if (o.ok) {
      spdlog::info("hook {}{}: {}{}", call.name, joined(call.args), o.describe(),
                   o.output.empty() ? "" : "; output: " + o.output);
    } else {
      spdlog::warn("hook {} {}{} failed: {}{} (not retried)", call.name, call.path, joined(call.args), o.describe(),
                   o.output.empty() ? "" : "; output: " + o.output);
    }
    lock.lock();
    ++status_.runs;
    if (!o.ok) ++status_.failures;
    status_.last = std::move(o);
    busy_ = false;
    cv_.notify_all();
  }
}

HookOutcome HookRunner::execute(const HookCall& call) {
  HookOutcome o;
  o.name = call.name;
  o.args = call.args;

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    o.error = std::string("pipe: ") + std::strerror(errno);
    return o;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);

  std::vector<std::string> envStrings;
  for (char** e = environ; *e; ++e) envStrings.emplace_back(*e);
  envStrings.insert(envStrings.end(), call.env.begin(), call.env.end());
  std::vector<char*> envp;
  for (auto& e : envStrings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argStrings = {call.path};
  argStrings.insert(argStrings.end(), call.args.begin(), call.args.end());
  std::vector<char*> argv;
  for (auto& a : argStrings) argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid = -1;
  const int rc = posix_spawn(&pid, call.path.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    o.error = call.path + ": " + std::strerror(rc);
    return o;
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds_);
  bool pipeOpen = true;
  int wstatus = 0;
  bool exited = false;
  while (!exited) {
    if (pipeOpen) {
      pollfd p{out[0], POLLIN, 0};
      if (poll(&p, 1, kPollMs) > 0) {
        char buf[1024];
        const ssize_t n = read(out[0], buf, sizeof buf);
        if (n <= 0) {
          pipeOpen = false;
        } else if (o.output.size() < kMaxOutput) {
          o.output.append(buf, std::min<size_t>(static_cast<size_t>(n), kMaxOutput - o.output.size()));
        }
      }
    } else {
      usleep(kPollMs * 1000);
    }
    const pid_t w = waitpid(pid, &wstatus, WNOHANG);
    if (w == pid) {
      exited = true;
      break;
    }
    bool stop;
    {
      std::lock_guard lock(mu_);
      stop = stopping_;
    }
    if (stop || std::chrono::steady_clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      o.timedOut = !stop;
      if (stop) o.error = "the agent stopped";
      exited = true;
    }
  }
  // What the hook wrote before it exited (its own children may still hold the pipe).
  for (pollfd p{out[0], POLLIN, 0}; pipeOpen && o.output.size() < kMaxOutput && poll(&p, 1, 0) > 0;) {
    char buf[1024];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    o.output.append(buf, std::min<size_t>(static_cast<size_t>(n), kMaxOutput - o.output.size()));
  }
  close(out[0]);
  while (!o.output.empty() && (o.output.back() == '\n' || o.output.back() == '\r')) o.output.pop_back();
  if (!o.timedOut && o.error.empty()) {
    if (WIFEXITED(wstatus)) o.exitCode = WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus)) o.signal = WTERMSIG(wstatus);
  }
  o.ok = o.exitCode && *o.exitCode == 0;
  return o;
}

}  // namespace dugong::agent
