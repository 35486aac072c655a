#include "pg/slot_drop_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "pg/testing/pg_test_cluster.h"

namespace dugong::pg {
namespace {

using namespace std::chrono_literals;

// A server that refuses the first `failures` drops, then drops; records each attempt.
struct FakeServer {
  std::mutex mu;
  int failures = 0;
  std::vector<std::string> attempts;  // "conninfo/slot"
  Result<bool> drop(const std::string& conninfo, const std::string& slot) {
    std::lock_guard lock(mu);
    attempts.push_back(conninfo + "/" + slot);
    if (failures > 0) {
      --failures;
      return Error{"connection timed out"};
    }
    return true;
  }
  size_t count() {
    std::lock_guard lock(mu);
    return attempts.size();
  }
};

TEST(SlotDropQueue, AFailedDropIsRetriedUntilItSucceeds) {
  FakeServer server;
  server.failures = 2;
  SlotDropQueue q([&](const std::string& c, const std::string& s) { return server.drop(c, s); }, 1ms, 10);
  q.add("peer-b", "host=b", "dugong_c");
  ASSERT_TRUE(testing::eventually([&] { return q.pending() == 0; }, 10s));
  EXPECT_EQ(server.attempts, (std::vector<std::string>{"host=b/dugong_c", "host=b/dugong_c", "host=b/dugong_c"}));
}

TEST(SlotDropQueue, ADropIsGivenUpAfterItsAttempts) {
  FakeServer server;
  server.failures = 1000;
  SlotDropQueue q([&](const std::string& c, const std::string& s) { return server.drop(c, s); }, 1ms, 4);
  q.add("peer-b", "host=b", "dugong_c");
  ASSERT_TRUE(testing::eventually([&] { return q.pending() == 0; }, 10s));
  EXPECT_EQ(server.count(), 4u);
}

TEST(SlotDropQueue, AnUpstreamReturnedToKeepsItsSlot) {
  FakeServer server;
  server.failures = 1000;
  // Retries an hour apart: after the first failure, nothing more is attempted.
  SlotDropQueue q([&](const std::string& c, const std::string& s) { return server.drop(c, s); }, 3600s, 10);
  q.add("peer-b", "host=b", "dugong_c");
  ASSERT_TRUE(testing::eventually([&] { return server.count() == 1; }, 10s));
  EXPECT_EQ(q.pending(), 1u);
  q.cancel("peer-b");
  EXPECT_EQ(q.pending(), 0u);
}

TEST(SlotDropQueue, TheDestructorWaitsForADropInFlight) {
  std::atomic<bool> inDrop{false}, release{false}, finished{false};
  {
    SlotDropQueue q(
        [&](const std::string&, const std::string&) -> Result<bool> {
          inDrop = true;
          while (!release) std::this_thread::sleep_for(1ms);
          finished = true;
          return true;
        },
        1ms, 10);
    q.add("peer-b", "host=b", "dugong_c");
    ASSERT_TRUE(testing::eventually([&] { return inDrop.load(); }, 10s));
    release = true;
  }
  EXPECT_TRUE(finished);
}

}  // namespace
}  // namespace dugong::pg
