#include "tests/support/test_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>
#include <vector>

namespace dugong::testing {

std::pair<int, int> ephemeralPortRange() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 32768;
  int hi = 60999;
  in >> lo >> hi;
  return {lo, hi};
}

namespace {

bool bindsOnLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as the servers bind
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

int freeLoopbackPort() {
  // Outside the ephemeral range, so that no client connection takes the port before the
  // server binds it, and reserved by a lock file this process holds until it exits, so
  // that no other test process (ctest runs several at once) is handed the same port.
  static std::mutex mutex;
  std::lock_guard<std::mutex> guard(mutex);
  const char* base = std::getenv("DUGONG_TEST_TMP");
  std::string dir = std::string(base && *base ? base : "/tmp") + "/dugong-test-ports";
  if (::mkdir(dir.c_str(), 01777) == 0) ::chmod(dir.c_str(), 01777);
  auto [lo, hi] = ephemeralPortRange();
  constexpr int kFirst = 10000;
  constexpr int kLast = 65535;
  std::vector<int> candidates;
  for (int p = kFirst; p <= kLast; ++p) {
    if (p < lo || p > hi) candidates.push_back(p);
  }
  if (candidates.empty()) throw std::runtime_error("no loopback port outside the ephemeral range " + dir);
  std::mt19937 pick(static_cast<unsigned>(::getpid()) ^ static_cast<unsigned>(std::random_device{}()));
  size_t start = std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(pick);
  for (size_t i = 0; i < candidates.size(); ++i) {
    int port = candidates[(start + i) % candidates.size()];
    std::string lockFile = dir + "/" + std::to_string(port);
    int fd = ::open(lockFile.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      continue;
    }
    if (!bindsOnLoopback(port)) {
      ::close(fd);
      continue;
    }
    return port;  // the lock's descriptor stays open (and the port reserved) until exit
  }
  throw std::runtime_error("no free loopback port outside the ephemeral range");
}

ScratchDir::ScratchDir(const std::string& prefix) {
  const char* base = std::getenv("DUGONG_TEST_TMP");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
  }
  ::chmod(tmpl.c_str(), 0755);
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  if (std::getenv("DUGONG_KEEP_TEST_DIRS")) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

TestCertificate makeSelfSignedCertificate(const std::string& dir, const std::string& subjectAltName) {
  TestCertificate c{dir + "/cert.pem", dir + "/key.pem"};
  commandOutput("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=dugong-test -addext subjectAltName=" +
                subjectAltName + " -keyout " + c.keyFile + " -out " + c.certFile + " 2>/dev/null");
  return c;
}

std::string commandOutput(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

std::string fileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace dugong::testing
