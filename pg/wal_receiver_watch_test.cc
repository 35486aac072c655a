#include "pg/wal_receiver_watch.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

using namespace std::chrono_literals;
const std::chrono::steady_clock::time_point t0{};

// A receiver streams once the same process has streamed for kSteadyStreamFor, and as
// long as it goes on.
TEST(WalReceiverWatch, TheSameReceiverStreamingForAWhileStreams) {
  WalReceiverWatch w;
  EXPECT_FALSE(w.streams("streaming", "100", t0));
  EXPECT_FALSE(w.streams("streaming", "100", t0 + WalReceiverWatch::kSteadyStreamFor - 1ms));
  EXPECT_TRUE(w.streams("streaming", "100", t0 + WalReceiverWatch::kSteadyStreamFor));
  EXPECT_TRUE(w.streams("streaming", "100", t0 + 10s));
}

// Receivers refused at once, each seen once (a new process every 200 ms): never.
TEST(WalReceiverWatch, ReceiversThatComeAndGoNeverStream) {
  WalReceiverWatch w;
  for (int i = 0; i < 50; ++i) {
    const auto at = t0 + i * 200ms;
    EXPECT_FALSE(w.streams("streaming", std::to_string(100 + i), at));
    EXPECT_FALSE(w.streams(std::nullopt, std::nullopt, at + 100ms));
  }
}

// A gap (no receiver, or another status) starts the clock again, even for the same pid.
TEST(WalReceiverWatch, AnyOtherSampleStartsTheClockAgain) {
  WalReceiverWatch w;
  EXPECT_FALSE(w.streams("streaming", "100", t0));
  EXPECT_FALSE(w.streams("waiting", "100", t0 + 1s));
  EXPECT_FALSE(w.streams("streaming", "100", t0 + 2s));
  EXPECT_TRUE(w.streams("streaming", "100", t0 + 3s));
  EXPECT_FALSE(w.streams("streaming", "101", t0 + 4s));
  EXPECT_FALSE(w.streams("streaming", std::nullopt, t0 + 5s));
}

}  // namespace
}  // namespace dugong::pg
