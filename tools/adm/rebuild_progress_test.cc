#include "tools/adm/rebuild_progress.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <string>

#include <gtest/gtest.h>

namespace dugong::adm {
namespace {

TEST(RebuildProgress, HumanBytes) {
  EXPECT_EQ(humanBytes(512), "512 B");
  EXPECT_EQ(humanBytes(1536), "1.5 kB");
  EXPECT_EQ(humanBytes(3.5 * 1024 * 1024 * 1024), "3.5 GB");
}

// A child (and its own child, as pg_basebackup under runuser) writes 4 MB to /dev/null
// and waits: both count while they live.
TEST(RebuildProgress, CountsWhatDescendantsWrote) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const uint64_t before = bytesWrittenByDescendants(::getpid());
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // killed as a group, grandchild included
    ::close(ready[0]);
    pid_t grandchild = ::fork();
    FILE* out = std::fopen("/dev/null", "w");
    std::string block(1 << 20, 'x');
    for (int i = 0; i < 2; ++i) std::fwrite(block.data(), 1, block.size(), out);
    std::fflush(out);
    if (grandchild == 0) {
      ::pause();
      ::_exit(0);
    }
    if (::write(ready[1], "r", 1) != 1) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::usleep(100 * 1000);  // the grandchild has written too, or is about to
  uint64_t written = 0;
  for (int i = 0; i < 50 && written < (4u << 20); ++i) {
    written = bytesWrittenByDescendants(::getpid()) - before;
    if (written < (4u << 20)) ::usleep(100 * 1000);
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_GE(written, 4u << 20);
}

}  // namespace
}  // namespace dugong::adm
