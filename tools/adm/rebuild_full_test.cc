#include "tools/adm/rebuild_full.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <stdlib.h>


namespace dugong::adm {
namespace {

namespace fs = std::filesystem;

// A directory of its own under the system's temporary directory, removed at the end.
struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "rebuild_full_test.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  const std::string& path() const { return dir; }
  std::string dir;
};

TEST(RebuildFull, TheOldDirectoryIsRemovedOnlyWhenItHoldsNothingTheClusterMayNeed) {
  std::string why;
  EXPECT_TRUE(removeAfterCopy(OldDataDir{.setUp = true, .standby = true, .systemId = "7"}, "7", false, &why));
  EXPECT_TRUE(removeAfterCopy(OldDataDir{.setUp = false, .standby = false, .systemId = ""}, "7", false, &why));
  EXPECT_FALSE(removeAfterCopy(OldDataDir{.setUp = true, .standby = false, .systemId = "7"}, "7", false, &why));
  EXPECT_EQ(why, "it last ran as a primary: it may hold WAL that no other peer has");
  EXPECT_FALSE(removeAfterCopy(OldDataDir{.setUp = true, .standby = true, .systemId = "8"}, "7", false, &why));
  EXPECT_EQ(why, "it held another database system (8, the copy is of 7)");
  EXPECT_FALSE(removeAfterCopy(OldDataDir{.setUp = true, .standby = true, .systemId = ""}, "7", false, &why));
  EXPECT_EQ(why, "its database system could not be compared with the copy's");
  // The operator's --discard-data: removed whatever it held.
  EXPECT_TRUE(removeAfterCopy(OldDataDir{.setUp = true, .standby = false, .systemId = "8"}, "7", true, &why));
}

TEST(RebuildFull, MoveAsideAndPutBackKeepTheOldDataExactly) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/data";
  fs::create_directories(dir);
  std::ofstream(dir + "/PG_VERSION") << "15\n";
  ASSERT_EQ(moveAside(dir).value(), true);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(fs::exists(setAsidePath(dir) + "/PG_VERSION"));
  // A failed copy's leftovers, its marker included, are replaced by the old directory.
  fs::create_directories(dir);
  std::ofstream(dir + "/partial") << "x";
  std::ofstream(incompleteMarkerPath(dir)) << "basebackup\n";
  ASSERT_EQ(putBack(dir, false).value(), true);
  EXPECT_TRUE(fs::exists(dir + "/PG_VERSION"));
  EXPECT_FALSE(fs::exists(dir + "/partial"));
  EXPECT_FALSE(fs::exists(setAsidePath(dir)));
  EXPECT_FALSE(fs::exists(incompleteMarkerPath(dir))) << "the old directory would never start again";
  // A marker that was there before the copy stays: the old directory was not complete.
  ASSERT_EQ(moveAside(dir).value(), true);
  std::ofstream(incompleteMarkerPath(dir)) << "rewind\n";
  ASSERT_EQ(putBack(dir, true).value(), true);
  EXPECT_TRUE(fs::exists(incompleteMarkerPath(dir)));
}

TEST(RebuildFull, AnEarlierSetAsideDirectoryIsNeverOverwritten) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/data";
  fs::create_directories(dir);
  fs::create_directories(setAsidePath(dir));
  std::ofstream(setAsidePath(dir) + "/PG_VERSION") << "15\n";
  auto r = moveAside(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("exists already"), std::string::npos) << r.error();
  EXPECT_TRUE(fs::exists(dir));
  EXPECT_TRUE(fs::exists(setAsidePath(dir) + "/PG_VERSION"));
  // Nothing there: nothing to move, nothing to put back.
  TempDir empty;
  EXPECT_EQ(moveAside(empty.path() + "/none").value(), false);
  EXPECT_EQ(putBack(empty.path() + "/none", false).value(), false);
}

}  // namespace
}  // namespace dugong::adm
