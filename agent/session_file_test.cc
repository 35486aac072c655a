#include "agent/session_file.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "agent/instance_lock.h"
#include "tests/support/test_env.h"

namespace dugong::agent {
namespace {

SessionOwner owner() { return SessionOwner::current("db1", "/dugong/c1", "/var/lib/dugong/data"); }

class SessionFileTest : public ::testing::Test {
 protected:
  dugong::testing::ScratchDir dir{"session-file"};
  std::string path() const { return dir.path() + "/data.dugong-session"; }
};

TEST_F(SessionFileTest, NoFileIsNoSession) {
  auto loaded = SessionFile(path(), owner()).load();
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  EXPECT_FALSE(loaded->has_value());
}

TEST_F(SessionFileTest, SavedSessionIsLoadedBackFromAPrivateFile) {
  SessionFile file(path(), owner());
  const std::string password("\x00\x01\xfe\xff" "abcdefghijkl", 16);
  ASSERT_TRUE(file.save({0x1000c78e910000, password}).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(path() + ".tmp"));
  auto loaded = SessionFile(path(), owner()).load();
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->sessionId, 0x1000c78e910000);
  EXPECT_EQ((*loaded)->password, password);
  // Saved again (a new session): replaced.
  ASSERT_TRUE(file.save({42, std::string(16, 'p')}).ok());
  EXPECT_EQ((*SessionFile(path(), owner()).load())->sessionId, 42);
  ASSERT_TRUE(file.remove().ok());
  EXPECT_FALSE(SessionFile(path(), owner()).load()->has_value());
  EXPECT_TRUE(file.remove().ok());
}

TEST_F(SessionFileTest, AFileWrittenByAnotherHostOrAgentIsRefused) {
  SessionOwner elsewhere = owner();
  elsewhere.host = "another-host";
  elsewhere.machineId = "0123456789abcdef";
  ASSERT_TRUE(SessionFile(path(), elsewhere).save({42, std::string(16, 'p')}).ok());
  auto loaded = SessionFile(path(), owner()).load();
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().find("another-host"), std::string::npos) << loaded.error();
  EXPECT_NE(loaded.error().find("refusing"), std::string::npos) << loaded.error();

  SessionOwner otherPeer = owner();
  otherPeer.peerId = "db2";
  ASSERT_TRUE(SessionFile(path(), otherPeer).save({42, std::string(16, 'p')}).ok());
  EXPECT_FALSE(SessionFile(path(), owner()).load().ok());

  SessionOwner otherData = owner();
  otherData.dataDir = "/srv/other";
  ASSERT_TRUE(SessionFile(path(), otherData).save({42, std::string(16, 'p')}).ok());
  EXPECT_FALSE(SessionFile(path(), owner()).load().ok());
}

TEST_F(SessionFileTest, AMalformedFileIsAnError) {
  std::ofstream(path()) << "{\"sessionId\": \"x\"}";
  EXPECT_FALSE(SessionFile(path(), owner()).load().ok());
  std::ofstream(path()) << "{\"sessionId\": 5, \"password\": \"zz\"}";
  EXPECT_FALSE(SessionFile(path(), owner()).load().ok());
}

TEST_F(SessionFileTest, OnlyOneHolderOfTheInstanceLock) {
  auto first = InstanceLock::acquire(path() + ".lock");
  ASSERT_TRUE(first.ok()) << first.error();
  auto second = InstanceLock::acquire(path() + ".lock");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().find("another dugong agent"), std::string::npos) << second.error();
  first.value().reset();
  EXPECT_TRUE(InstanceLock::acquire(path() + ".lock").ok());
}

}  // namespace
}  // namespace dugong::agent
