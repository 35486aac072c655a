#include "tests/support/net_namespace.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <utility>

namespace dugong::testing {
namespace {

// Runs `command` (its stderr with its stdout); the exit status and the output.
std::pair<int, std::string> run(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, std::strerror(errno)};
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), buf.size(), p)) out += buf.data();
  const int status = ::pclose(p);
  return {status, out};
}

// Runs `fn` on a thread that has entered the namespace `nsFd` (a socket made there stays
// there); the calling thread keeps its own.
template <class F>
auto inNamespace(int nsFd, F fn) -> decltype(fn()) {
  decltype(fn()) result{};
  std::string error;
  std::thread t([&] {
    if (::setns(nsFd, CLONE_NEWNET) != 0) {
      error = std::string("setns: ") + std::strerror(errno);
      return;
    }
    try {
      result = fn();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  t.join();
  if (!error.empty()) throw std::runtime_error("net namespace: " + error);
  return result;
}

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Deletes the namespaces `prefix`<pid> left by an earlier run that was killed (a test's
// timeout) before it could delete them: their process is gone and nothing runs in them.
void removeStale(const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/var/run/netns", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (::kill(std::stoi(pid), 0) == 0 || errno != ESRCH) continue;
    if (auto [status, out] = run("ip netns pids " + name); status == 0 && out.empty()) run("ip netns del " + name);
  }
}

}  // namespace

int listenOnLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  sockaddr_in a = loopback(port);
  if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + why);
  }
  return fd;
}

int connectToLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::unique_ptr<NetNamespace> NetNamespace::make(const std::string& prefix, std::string* whyNot) {
  if (::geteuid() != 0) {
    *whyNot = "not root: network namespaces need CAP_SYS_ADMIN";
    return nullptr;
  }
  removeStale(prefix);
  const std::string name = prefix + std::to_string(::getpid());
  if (auto [status, out] = run("ip netns add " + name); status != 0) {
    *whyNot = "`ip netns add " + name + "` failed: " + out;
    return nullptr;
  }
  if (auto [status, out] = run("ip -n " + name + " link set lo up"); status != 0) {
    run("ip netns del " + name);
    *whyNot = "`ip -n " + name + " link set lo up` failed: " + out;
    return nullptr;
  }
  const int fd = ::open(("/var/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *whyNot = "cannot open /var/run/netns/" + name + ": " + std::strerror(errno);
    run("ip netns del " + name);
    return nullptr;
  }
  return std::unique_ptr<NetNamespace>(new NetNamespace(name, fd));
}

NetNamespace::~NetNamespace() {
  ::close(fd_);
  run("ip netns del " + name_);
}

int NetNamespace::listenOnLoopback(int port) const {
  return inNamespace(fd_, [port] { return testing::listenOnLoopback(port); });
}

int NetNamespace::connectToLoopback(int port) const {
  return inNamespace(fd_, [port] { return testing::connectToLoopback(port); });
}

}  // namespace dugong::testing
