// dugong-test-zookeeper start|stop DIR: the ctest fixture `zookeeper` (shared_zookeeper.h).
#include <iostream>
#include <string>

#include "zk/testing/shared_zookeeper.h"

int main(int argc, char** argv) {
  const std::string command = argc == 3 ? argv[1] : "";
  if (command == "start") return dugong::testing::startSharedZooKeeper(argv[2]);
  if (command == "stop") return dugong::testing::stopSharedZooKeeper(argv[2]);
  std::cerr << "usage: dugong-test-zookeeper start|stop DIR" << std::endl;
  return 2;
}
