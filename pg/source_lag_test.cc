// The arithmetic of a standby leader's lag to its source (pg/source_lag.h).
#include "pg/source_lag.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

const std::string kSource = "hosts 10.0.0.5:5432";

LeaderReplay streaming(const std::string& received, const std::string& replayed, double replayAge = 2.5) {
  LeaderReplay l;
  l.receivedLsn = received;
  l.replayedLsn = replayed;
  l.receivedTimeline = 3;
  l.walReceiverStatus = "streaming";
  l.lastReplayAgeSeconds = replayAge;
  return l;
}

SourceRead at(const std::string& wal, int64_t timeline = 3) { return SourceRead{"", "10.0.0.5:5432", wal, timeline}; }

TEST(SourceLag, BytesBehindTheSourceAndSecondsOnlyWhileReplayIsBehind) {
  auto l = computeSourceLag(kSource, streaming("0/3000000", "0/2000000"), at("0/5000000"), nullptr, 1000);
  EXPECT_EQ(l.lagBytes, std::optional<uint64_t>(0x2000000));
  EXPECT_EQ(l.replayLagBytes, std::optional<uint64_t>(0x3000000));
  EXPECT_EQ(l.lagSeconds, std::optional<double>(2.5));
  EXPECT_EQ(l.sourceSeenAtMs, 1000);
  EXPECT_TRUE(l.receiving());
  // Caught up with an idle source: the last replayed transaction's age is no lag.
  l = computeSourceLag(kSource, streaming("0/5000000", "0/5000000", 600), at("0/5000000"), nullptr, 1000);
  EXPECT_EQ(l.lagBytes, std::optional<uint64_t>(0));
  EXPECT_EQ(l.lagSeconds, std::optional<double>(0.0));
  EXPECT_EQ(l.toJson()["summary"], "0.0 MB and 0.0 s behind hosts 10.0.0.5:5432 (its primary 10.0.0.5:5432, its WAL at "
                                   "0/5000000 on timeline 3, read at 1970-01-01T00:00:01.000Z; received 0/5000000, replayed 0/5000000)");
  // Behind, with nothing replayed since postgres started (no replay timestamp): the
  // seconds are unknown, not 0.
  LeaderReplay fresh = streaming("0/5000000", "0/3000000");
  fresh.lastReplayAgeSeconds.reset();
  l = computeSourceLag(kSource, fresh, at("0/5000000"), nullptr, 1000);
  EXPECT_FALSE(l.lagSeconds.has_value());
  EXPECT_EQ(l.describe().rfind("0.0 MB and an unknown time behind", 0), 0u) << l.describe();
}

TEST(SourceLag, AnotherTimelineOrNothingReadIsUnknown) {
  auto l = computeSourceLag(kSource, streaming("0/3000000", "0/3000000"), at("0/5000000", 4), nullptr, 1000);
  EXPECT_FALSE(l.lagBytes.has_value());
  EXPECT_EQ(l.unknownWhy, "the source is on timeline 4, this leader received on 3");
  l = computeSourceLag(kSource, streaming("0/3000000", "0/3000000"), SourceRead{"connection refused", {}, {}, {}}, nullptr,
                       1000);
  EXPECT_FALSE(l.lagBytes.has_value());
  EXPECT_EQ(l.unknownWhy, "the source's position was never read: connection refused");
  // What the leader holds is said all the same: what promote-cluster --source-gone keeps.
  EXPECT_EQ(l.describe(),
            "lag to hosts 10.0.0.5:5432 unknown: the source's position was never read: connection refused; received "
            "0/3000000, replayed 0/3000000");
}

TEST(SourceLag, AnUnreachableSourceKeepsTheLastLagAsAtLeast) {
  auto first = computeSourceLag(kSource, streaming("0/3000000", "0/3000000"), at("0/3100000"), nullptr, 1000);
  LeaderReplay gone = streaming("0/3000000", "0/3000000");
  gone.walReceiverStatus.reset();
  gone.receivedTimeline.reset();
  auto l = computeSourceLag(kSource, gone, SourceRead{"timeout expired", {}, {}, {}}, &first, 5000);
  EXPECT_FALSE(l.sourceAnswered());
  EXPECT_EQ(l.sourceWal, std::optional<std::string>("0/3100000"));
  EXPECT_EQ(l.sourceSeenAtMs, 1000);
  EXPECT_EQ(l.sourcePrimary, "10.0.0.5:5432");
  EXPECT_EQ(l.lagBytes, std::optional<uint64_t>(0x100000));
  EXPECT_EQ(l.leader.receivedTimeline, std::optional<int64_t>(3)) << "the last one seen";
  EXPECT_EQ(l.receivingStalledSinceMs, 0);
  EXPECT_EQ(l.describe().rfind("at least 1.0 MB and 2.5 s behind", 0), 0u) << l.describe();
  // Another source: nothing carries over.
  l = computeSourceLag("hosts 10.0.0.6:5432", gone, SourceRead{"timeout expired", {}, {}, {}}, &first, 5000);
  EXPECT_FALSE(l.sourceWal.has_value());
}

TEST(SourceLag, ReceivedNotMovingWhileTheSourceIsAheadIsAStallSinceThePreviousSample) {
  auto s1 = computeSourceLag(kSource, streaming("0/3000000", "0/3000000"), at("0/3000000"), nullptr, 1000);
  EXPECT_EQ(s1.receivingStalledSinceMs, 0);
  auto s2 = computeSourceLag(kSource, streaming("0/3000000", "0/3000000"), at("0/3200000"), &s1, 2000);
  EXPECT_EQ(s2.receivingStalledSinceMs, 1000);
  auto s3 = computeSourceLag(kSource, streaming("0/3000000", "0/3000000"), at("0/3400000"), &s2, 3000);
  EXPECT_EQ(s3.receivingStalledSinceMs, 1000);
  auto s4 = computeSourceLag(kSource, streaming("0/3100000", "0/3000000"), at("0/3400000"), &s3, 4000);
  EXPECT_EQ(s4.receivingStalledSinceMs, 0) << "it moves again";
}

}  // namespace
}  // namespace dugong::pg
