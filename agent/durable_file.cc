#include "agent/durable_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dugong::agent {
namespace {

std::string parentOf(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Error fileError(const std::string& what, const std::string& path) {
  return Error{what + " " + path + ": " + std::strerror(errno)};
}

Result<bool> writeFileDurably(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fileError("cannot create", tmp);
  bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  int savedErrno = errno;
  ::close(fd);
  if (!ok) {
    ::unlink(tmp.c_str());
    errno = savedErrno;
    return fileError("cannot write", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = fileError("cannot rename " + tmp + " to", path);
    ::unlink(tmp.c_str());
    return e;
  }
  int dir = ::open(parentOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return fileError("cannot open the directory of", path);
  ok = ::fsync(dir) == 0;
  savedErrno = errno;
  ::close(dir);
  errno = savedErrno;
  if (!ok) return fileError("cannot sync the directory of", path);
  return true;
}

}  // namespace dugong::agent
