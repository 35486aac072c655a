#include "tools/adm/config_file.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace dugong::adm {
namespace {

TEST(ConfigFile, TheAgentsFileGivesClusterZooKeeperAndCredentials) {
  char path[] = "/tmp/dugong-adm-pw-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << "s3cret\n";
  CommonOptions o;
  auto ok = applyConfigText(std::string("cluster: main\nzookeeper:\n  connect: zk1:2181,zk2:2181\n  chroot: /prod\n"
                                        "  auth:\n    user: dugong\n    passwordFile: ") +
                                path + "\npeer:\n  ip: 10.0.0.5\npostgres:\n  dataDir: /var/lib/dugong/data\n",
                            "dugong.yaml", o);
  std::remove(path);
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(o.cluster, "main");
  EXPECT_EQ(o.zk, "zk1:2181,zk2:2181/prod");
  ASSERT_TRUE(o.auth);
  EXPECT_EQ(o.auth->user, "dugong");
  EXPECT_EQ(o.auth->password, "s3cret");
  auto z = zkOptionsFrom(o);
  ASSERT_TRUE(z) << z.error();
  EXPECT_EQ(z->chroot, "/prod");
}

TEST(ConfigFile, TheCommandLineWins) {
  CommonOptions o;
  o.zk = "other:2181";
  o.cluster = "c2";
  ASSERT_TRUE(applyConfigText("cluster: main\nzookeeper:\n  connect: zk1:2181\n  root: /x/main\n", "f", o));
  EXPECT_EQ(o.zk, "other:2181");
  EXPECT_EQ(o.cluster, "c2");
  EXPECT_EQ(o.root, "");
}

TEST(ConfigFile, BadFilesAreClearErrors) {
  CommonOptions o;
  EXPECT_FALSE(applyConfigText("cluster: [", "f", o));
  EXPECT_FALSE(applyConfigText("cluster: main\n", "f", o));
  auto noFile = applyConfigText("cluster: m\nzookeeper:\n  connect: z:1\n  auth:\n    user: u\n    passwordFile: /nonexistent\n",
                                "f", o);
  ASSERT_FALSE(noFile);
  EXPECT_NE(noFile.error().find("cannot read /nonexistent"), std::string::npos) << noFile.error();
  EXPECT_FALSE(applyConfigFile("/nonexistent.yaml", o));
}

}  // namespace
}  // namespace dugong::adm
