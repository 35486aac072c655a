#include "pg/command.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dugong::pg {
namespace {

struct UserIds {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home = "/";
  std::vector<gid_t> groups;
};

bool lookupUser(const std::string& name, UserIds* out, std::string* error) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  int rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) {
    *error = "OS user '" + name + "' does not exist";
    return false;
  }
  out->uid = pw.pw_uid;
  out->gid = pw.pw_gid;
  out->home = pw.pw_dir ? pw.pw_dir : "/";
  int n = 64;
  out->groups.resize(static_cast<size_t>(n));
  if (::getgrouplist(name.c_str(), pw.pw_gid, out->groups.data(), &n) < 0) {
    out->groups.resize(static_cast<size_t>(n));
    ::getgrouplist(name.c_str(), pw.pw_gid, out->groups.data(), &n);
  }
  out->groups.resize(static_cast<size_t>(n));
  return true;
}

// Only async-signal-safe calls between fork and exec.
[[noreturn]] void childExec(int outFd, const UserIds* user, const char* workDir, char* const* argv,
                            char* const* envp) {
  ::setpgid(0, 0);
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::dup2(outFd, 1);
  ::dup2(outFd, 2);
  // Nothing else of the agent's (its HTTP listener, its ZooKeeper socket) may leak into
  // postgres, which outlives the agent.
  ::close_range(3, ~0U, 0);
  if (user != nullptr) {
    if (::setgroups(user->groups.size(), user->groups.data()) != 0 || ::setgid(user->gid) != 0 ||
        ::setuid(user->uid) != 0) {
      static const char kMsg[] = "dugong: cannot switch to the OS user\n";
      (void)!::write(2, kMsg, sizeof kMsg - 1);
      ::_exit(126);
    }
  }
  if (::chdir(workDir) != 0) {
    (void)!::chdir("/");
  }
  ::execve(argv[0], argv, envp);
  static const char kMsg[] = "dugong: exec failed\n";
  (void)!::write(2, kMsg, sizeof kMsg - 1);
  ::_exit(127);
}

}  // namespace

std::string CommandResult::describe() const {
  if (!started) return "not started: " + error;
  if (timedOut) return "timed out after " + std::to_string(elapsed.count()) + " ms";
  if (signal != 0) return "killed by signal " + std::to_string(signal);
  return "exit " + std::to_string(exitCode);
}

std::string describeArgv(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    if (plain) {
      out += a;
    } else {
      out += '\'';
      for (char c : a) {
        if (c == '\'') out += "'\\''"; else out += c;
      }
      out += '\'';
    }
  }
  return out;
}

CommandResult runCommand(const CommandSpec& spec) {
  CommandResult result;
  auto start = std::chrono::steady_clock::now();
  if (spec.argv.empty()) {
    result.error = "empty argv";
    return result;
  }
  UserIds user;
  bool switchUser = !spec.runAsUser.empty();
  if (switchUser && !lookupUser(spec.runAsUser, &user, &result.error)) return result;

  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"LANG", "C.UTF-8"}, {"LC_ALL", "C.UTF-8"},
      {"HOME", switchUser ? user.home : "/root"}};
  for (const auto& [k, v] : spec.env) env[k] = v;
  std::vector<std::string> envStrings;
  for (const auto& [k, v] : env) envStrings.push_back(k + "=" + v);
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : envStrings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    result.error = std::string("fork: ") + std::strerror(errno);
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (pid == 0) {
    childExec(fds[1], switchUser ? &user : nullptr, spec.workDir.c_str(), argv.data(), envp.data());
  }
  ::setpgid(pid, pid);  // also done in the child; whichever runs first wins
  ::close(fds[1]);
  result.started = true;

  auto deadline = start + spec.timeout;
  bool eof = false;
  char buf[8192];
  while (!eof) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      result.timedOut = true;
      break;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{fds[0], POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    result.output.append(buf, static_cast<size_t>(n));
    if (result.output.size() > spec.maxOutput) {
      result.output.erase(0, result.output.size() - spec.maxOutput);
    }
  }
  ::close(fds[0]);

  int status = 0;
  if (result.timedOut) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  } else {
    // Output closed: the program is exiting. Still bound the wait by the deadline.
    for (;;) {
      pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      if (r < 0 && errno != EINTR) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        result.timedOut = true;
        ::kill(-pid, SIGKILL);
        ::kill(pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        break;
      }
      ::usleep(10000);
    }
  }
  if (!result.timedOut) {
    if (WIFEXITED(status)) result.exitCode = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return result;
}

}  // namespace dugong::pg
