// zk::SourceWatch's stop (zk/source_watch.h): the agent's event loop stops a watch when
// the standby source changes or promote-cluster ends the standby cluster, often while
// the source's ensemble is unreachable. The e2e case of a promotion with the source's
// site gone (StandbyDugongSource.ALeaderRestartedWithItsSourceGoneKeepsRunningAndIsPromoted)
// found the loop held by the watch's join for up to two seconds, past the watchdog's
// bound, which then stopped the new primary's postgres.
#include "zk/source_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include <gtest/gtest.h>

#include "tests/support/net_namespace.h"

namespace dugong::zk {
namespace {

// An "ensemble" that accepts the TCP connection and never answers: the watch's connect
// waits for its whole timeout (twice the interval, 6 s), then its first observation
// (unreachable) would be delivered.
TEST(SourceWatch, StopReturnsDuringAReadOfAnEnsembleThatDoesNotAnswerAndNothingIsSeenAfterIt) {
  const int listener = dugong::testing::listenOnLoopback(0);
  ASSERT_GE(listener, 0);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);

  StandbySource source;
  source.cluster = "site-a";
  source.zookeeper = {HostPort{"127.0.0.1", port}};
  source.root = "/dugong/site-a";
  std::atomic<int> seen{0};
  {
    SourceWatch watch(source, std::nullopt, 3000, [&](SourceObservation) { ++seen; });
    // The watch's thread is in its connect once the listener has its connection.
    const int accepted = ::accept(listener, nullptr, nullptr);
    ASSERT_GE(accepted, 0);
    watch.stop();
    EXPECT_FALSE(watch.ended()) << "stop() waited for the read in progress";
    ::close(accepted);
  }  // joined: the read has failed and the thread returned
  ::close(listener);
  EXPECT_EQ(seen.load(), 0) << "an observation was delivered after stop()";
}

}  // namespace
}  // namespace dugong::zk
