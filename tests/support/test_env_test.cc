#include "tests/support/test_env.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>

namespace dugong::testing {
namespace {

// An outgoing connection (every libpq and ZooKeeper client opens some) takes its local
// port from the kernel's ephemeral range: a server port handed out there can be taken
// between the test's choice and the server's bind.
TEST(FreeLoopbackPort, IsNeverOneAnOutgoingConnectionCanTake) {
  auto [lo, hi] = ephemeralPortRange();
  ASSERT_GT(hi, 0);
  for (int i = 0; i < 50; ++i) {
    int port = freeLoopbackPort();
    EXPECT_TRUE(port < lo || port > hi) << port << " is in the ephemeral range " << lo << ".." << hi;
  }
}

TEST(FreeLoopbackPort, IsNeverHandedOutTwiceWhileItsHolderRuns) {
  std::set<int> mine;
  for (int i = 0; i < 20; ++i) mine.insert(freeLoopbackPort());
  EXPECT_EQ(mine.size(), 20u);
  // Another test process at the same time (ctest runs several) gets other ports.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    for (int i = 0; i < 20; ++i) {
      int p = freeLoopbackPort();
      if (::write(fds[1], &p, sizeof p) != sizeof p) ::_exit(2);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  int p = 0;
  int seen = 0;
  while (::read(fds[0], &p, sizeof p) == sizeof p) {
    ++seen;
    EXPECT_EQ(mine.count(p), 0u) << "port " << p << " handed out to two processes";
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(seen, 20);
}

TEST(FileText, IsTheWholeFileAndNothingForAMissingOne) {
  ScratchDir dir("dugong-filetext");
  const std::string path = dir.path() + "/f";
  {
    std::ofstream out(path, std::ios::binary);
    out << "one\ntwo, without a newline";
  }
  EXPECT_EQ(fileText(path), "one\ntwo, without a newline");
  EXPECT_EQ(fileText(dir.path() + "/missing"), "");
}

}  // namespace
}  // namespace dugong::testing
