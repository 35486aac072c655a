#include "pg/wal_dir.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

namespace fs = std::filesystem;

TEST(WalDir, SegmentNamesRoundTrip) {
  EXPECT_EQ(walSegmentName(1, 3), "000000010000000000000003");
  EXPECT_EQ(walSegmentName(0x1A, 0x100 + 2), "0000001A0000000100000002");
  auto s = parseWalSegmentName("0000001A0000000100000002");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->timeline, 0x1A);
  EXPECT_EQ(s->segno, 0x102u);
  for (const char* other : {"00000002.history", "000000010000000000000003.partial", "archive_status",
                            "00000001000000000000000g"}) {
    EXPECT_FALSE(parseWalSegmentName(other).has_value()) << other;
  }
}

// A shutdown checkpoint record is 114 bytes: it ends 120 bytes on (aligned), or, where it
// does not fit on its page, after the next page's header (pg_rewind's own arithmetic).
TEST(WalDir, RecordEndCountsAlignmentAndPageHeaders) {
  EXPECT_EQ(walRecordEnd(WalPosition(0x3000028), 114), WalPosition(0x3000028 + 120));
  EXPECT_EQ(walRecordEnd(WalPosition(0x3000000 + 8192 - 40), 114), WalPosition(0x3000000 + 8192 + 24 + 80));
  // continued onto a segment's first page: the long header
  EXPECT_EQ(walRecordEnd(WalPosition(0x4000000 - 16), 114), WalPosition(0x4000000 + 40 + 104));
  // exactly filling its page
  EXPECT_EQ(walRecordEnd(WalPosition(0x3000000 + 8192 - 120), 120), WalPosition(0x3000000 + 8192));
}

TEST(WalDir, HistoryFileNames) {
  EXPECT_EQ(parseTimelineHistoryName("0000001A.history"), std::optional<int64_t>(0x1A));
  for (const char* other : {"000000010000000000000003", "0000001A.history.tmp", "0000001a.history", "1.history"}) {
    EXPECT_FALSE(parseTimelineHistoryName(other).has_value()) << other;
  }
}

class WalDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dugong-wal-dir-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void file(const std::string& name, const std::string& text = "") { std::ofstream(dir_ / name) << text; }
  std::string dir() const { return dir_.string(); }
  fs::path dir_;
};

// Promoted at 0/3000140 (timeline 2), then at 0/4000100 (timeline 3), as postgres writes
// the history files.
TEST_F(WalDirTest, APromotedWalIsOnItsNewestSegmentsTimelineWithItsAncestors) {
  file("00000002.history", "1\t0/3000140\tno recovery target specified\n");
  file("00000003.history",
       "1\t0/3000140\tno recovery target specified\n\n2\t0/4000100\tno recovery target specified\n");
  for (const char* s : {"000000010000000000000003", "000000020000000000000003", "000000020000000000000004",
                        "000000030000000000000004", "000000030000000000000005"}) {
    file(s);
  }
  auto h = readTimelineHistory(dir(), WalPosition(0x5000200));
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h->timeline, 3);
  ASSERT_EQ(h->ancestors.size(), 2u);
  EXPECT_EQ(h->ancestors[0], (TimelineHistory::Ancestor{1, WalPosition(0x3000140)}));
  EXPECT_EQ(h->ancestors[1], (TimelineHistory::Ancestor{2, WalPosition(0x4000100)}));
  // In the segment of the second switch, the new timeline's copy of it counts.
  EXPECT_EQ(readTimelineHistory(dir(), WalPosition(0x4000200))->timeline, 3);
}

// A standby that fetched timeline 2's history but is past its fork: it never wrote a
// segment of timeline 2, and is on timeline 1.
TEST_F(WalDirTest, AHistoryFileOfATimelineNotFollowedDoesNotCount) {
  file("00000002.history", "1\t0/3000140\tno recovery target specified\n");
  file("000000010000000000000003");
  auto h = readTimelineHistory(dir(), WalPosition(0x3000400));
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h->timeline, 1);
  EXPECT_TRUE(h->ancestors.empty());
  EXPECT_EQ(h->timelineAt(WalPosition(0x3000400)), 1);
}

TEST_F(WalDirTest, MissingOrBrokenFilesAreErrors) {
  auto none = readTimelineHistory(dir(), WalPosition(0x3000400));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("no segment file"), std::string::npos) << none.error();
  file("000000020000000000000003");
  auto noHistory = readTimelineHistory(dir(), WalPosition(0x3000400));
  ASSERT_FALSE(noHistory.ok());
  EXPECT_NE(noHistory.error().find("cannot read"), std::string::npos) << noHistory.error();
  file("00000002.history", "1 nonsense\n");
  auto broken = readTimelineHistory(dir(), WalPosition(0x3000400));
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().find("cannot parse"), std::string::npos) << broken.error();
  EXPECT_FALSE(readTimelineHistory(dir(), WalPosition(0)).ok());
}

}  // namespace
}  // namespace dugong::pg
