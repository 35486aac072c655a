#include "zk/testing/shared_zookeeper.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <thread>

#include "zk/testing/zookeeper_server.h"

namespace dugong::testing {

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::atomic<bool> stopAsked{false};

void askToStop(int) { stopAsked = true; }

// A process that exists and is not a zombie (the keeper's parent is gone by the time it
// ends, and a container's init may not reap it).
bool alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] != 'Z';
}

void writeFile(const std::string& path, const std::string& text) {
  const std::string partial = path + ".partial";
  std::ofstream(partial) << text;
  fs::rename(partial, path);
}

// The keeper: starts the server, reports on `ready`, and keeps it until asked to stop or
// until `owner` is gone. Its stdout and stderr are DIR/keeper.log.
int keep(const std::string& dir, pid_t owner, int ready) {
  struct sigaction action {};
  action.sa_handler = askToStop;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  std::unique_ptr<ZooKeeperCluster> server;
  try {
    server = std::make_unique<ZooKeeperCluster>();
  } catch (const std::exception& e) {
    const std::string error = std::string("error: ") + e.what();
    std::cerr << error << std::endl;
    if (::write(ready, error.data(), error.size()) < 0) std::cerr << "the starting process is gone" << std::endl;
    return 1;
  }
  const std::string connect = server->connectString();
  writeFile(dir + "/pid", std::to_string(::getpid()));
  writeFile(dir + "/connect", connect);
  std::cerr << "shared ZooKeeper serves on " << connect << " (log " << server->logFile(0) << ")" << std::endl;
  const std::string answer = "ready " + connect;
  if (::write(ready, answer.data(), answer.size()) < 0) stopAsked = true;
  ::close(ready);
  while (!stopAsked && alive(owner)) std::this_thread::sleep_for(200ms);
  std::cerr << (stopAsked ? "asked to stop: stopping the shared ZooKeeper"
                          : "the process that started it is gone: stopping the shared ZooKeeper")
            << std::endl;
  std::error_code ec;
  fs::remove(dir + "/connect", ec);
  server.reset();
  fs::remove(dir + "/pid", ec);
  return 0;
}

}  // namespace

std::optional<std::string> sharedZooKeeperConnect() {
  const char* fixtures = std::getenv(kClusterFixturesVariable);
  if (fixtures == nullptr || *fixtures == '\0') return std::nullopt;
  std::ifstream in(std::string(fixtures) + "/zookeeper/connect");
  std::string connect;
  if (!(in >> connect) || connect.empty()) {
    throw std::runtime_error(std::string(fixtures) +
                             "/zookeeper names no running ZooKeeper (did the ctest fixture zookeeper_start fail?)");
  }
  return connect;
}

int startSharedZooKeeper(const std::string& dir) {
  fs::create_directories(dir);
  std::error_code ec;
  fs::remove(dir + "/connect", ec);
  const pid_t owner = ::getppid();  // ctest, or the shell that ran the command
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0) {
    std::cerr << "dugong-test-zookeeper: pipe failed" << std::endl;
    return 1;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::cerr << "dugong-test-zookeeper: fork failed" << std::endl;
    return 1;
  }
  if (pid == 0) {
    ::close(pipeFds[0]);
    ::setsid();
    // Not ctest's pipes: ctest waits for them to close before it ends the setup test.
    const int log = ::open((dir + "/keeper.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (log < 0 || devnull < 0) ::_exit(1);
    ::dup2(devnull, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    std::exit(keep(dir, owner, pipeFds[1]));
  }
  ::close(pipeFds[1]);
  std::string answer;
  char buf[512];
  for (ssize_t n; (n = ::read(pipeFds[0], buf, sizeof buf)) != 0;) {
    if (n > 0) answer.append(buf, static_cast<size_t>(n));
    else if (errno != EINTR) break;
  }
  ::close(pipeFds[0]);
  if (answer.rfind("ready ", 0) != 0) {
    std::cerr << "dugong-test-zookeeper: the shared ZooKeeper did not start: "
              << (answer.empty() ? "its keeper ended (see " + dir + "/keeper.log)" : answer) << std::endl;
    return 1;
  }
  std::cout << "shared ZooKeeper " << answer.substr(6) << " kept by pid " << pid << " (" << dir << ")" << std::endl;
  return 0;
}

int stopSharedZooKeeper(const std::string& dir) {
  std::ifstream in(dir + "/pid");
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 0 || !alive(pid)) {
    std::cout << "no shared ZooKeeper runs in " << dir << std::endl;
    return 0;
  }
  ::kill(pid, SIGTERM);
  // The keeper stops its server (SIGTERM, SIGKILL after 10 s) and ends.
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (alive(pid) && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(100ms);
  if (alive(pid)) {
    std::cerr << "the keeper " << pid << " did not end: killed (its server dies with it)" << std::endl;
    ::kill(pid, SIGKILL);
  }
  std::cout << "shared ZooKeeper stopped (" << dir << ")" << std::endl;
  return 0;
}

}  // namespace dugong::testing
