#include "tests/support/test_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace dugong::testing {

int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::system_error(err, std::generic_category(), "bind to a free loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
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

}  // namespace dugong::testing
