#include "pg/rewound_wal.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>


namespace dugong::pg {
namespace {

namespace fs = std::filesystem;

class RewoundWalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dugong-rewound-wal-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "pg_wal");
    // Recovery starts in segment 2 of timeline 1; timeline 2 begins in segment 3.
    std::ofstream(dir_ / "backup_label") << "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n"
                                            "CHECKPOINT LOCATION: 0/3000060\n";
    std::ofstream(dir_ / "pg_wal" / "00000002.history") << "1\t0/3000140\tno recovery target specified\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  void segment(const std::string& name) {
    std::ofstream(dir_ / "pg_wal" / name).close();
    fs::resize_file(dir_ / "pg_wal" / name, 16 * 1024 * 1024);
  }
  fs::path dir_;
};

TEST_F(RewoundWalTest, EverySegmentFromTheStartOnTheTimelineRecoveryReadsIsThere) {
  for (const char* s : {"000000010000000000000002", "000000010000000000000003", "000000020000000000000003",
                        "000000020000000000000004"}) {
    segment(s);
  }
  auto m = firstMissingWalSegment(dir_.string());
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_FALSE(m.value().has_value()) << *m.value();
}

TEST_F(RewoundWalTest, TheNewTimelinesSegmentWhereItBeganIsMissing) {
  // The old timeline's copy of segment 3 goes on past the fork: it does not count.
  for (const char* s : {"000000010000000000000002", "000000010000000000000003", "000000020000000000000004"}) {
    segment(s);
  }
  auto m = firstMissingWalSegment(dir_.string());
  ASSERT_TRUE(m.ok()) << m.error();
  ASSERT_TRUE(m.value().has_value());
  EXPECT_EQ(*m.value(), "000000020000000000000003");
}

TEST_F(RewoundWalTest, TheSegmentOfTheStartIsMissing) {
  for (const char* s : {"000000020000000000000003", "000000020000000000000004"}) segment(s);
  auto m = firstMissingWalSegment(dir_.string());
  ASSERT_TRUE(m.ok()) << m.error();
  ASSERT_TRUE(m.value().has_value());
  EXPECT_EQ(*m.value(), "000000010000000000000002");
}

TEST_F(RewoundWalTest, NoBackupLabelIsAnError) {
  fs::remove(dir_ / "backup_label");
  EXPECT_FALSE(firstMissingWalSegment(dir_.string()).ok());
}

}  // namespace
}  // namespace dugong::pg
