// The isolated primary, repeated: each run sets up a fresh 3-peer cluster
// (real ZooKeeper, postgres with passwords, agents), cuts the primary's agent off from
// ZooKeeper while two clients write (tests/e2e/partition_scenario.h), and reports the
// time from the cut to the first write on the new primary through a multi-host
// target_session_attrs=read-write URL, and the acknowledged rows lost by each client.
//   partition_bench [runs=10] [sessionTimeoutMs=3000]
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "tests/e2e/partition_scenario.h"

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 10;
  const int sessionTimeoutMs = argc > 2 ? std::atoi(argv[2]) : 3000;
  if (runs < 1 || sessionTimeoutMs < 1000) {
    std::cerr << "usage: partition_bench [runs>=1] [sessionTimeoutMs>=1000]\n";
    return 2;
  }
  std::vector<long> toNew, toNotWritable;
  size_t carefulLost = 0, localLost = 0, carefulAcked = 0, localAcked = 0, hostileLost = 0, hostileAcked = 0;
  int failed = 0;
  for (int i = 0; i < runs; ++i) {
    dugong::e2e::PartitionCluster cluster(sessionTimeoutMs);
    auto o = cluster.run();
    if (!o.error.empty()) {
      ++failed;
      std::cout << "run " << i + 1 << ": FAILED: " << o.error << "\n";
      continue;
    }
    toNew.push_back(static_cast<long>(o.timeToNewPrimary->count()));
    if (o.timeToNotWritable) toNotWritable.push_back(static_cast<long>(o.timeToNotWritable->count()));
    carefulLost += o.carefulLost.size();
    localLost += o.localLost.size();
    carefulAcked += o.carefulAcked.size();
    localAcked += o.localAcked.size();
    hostileLost += o.hostileLost.size();
    hostileAcked += o.hostileAcked.size();
    std::cout << "run " << i + 1 << ": new primary after " << toNew.back() << " ms, /primary 503 after "
              << (o.timeToNotWritable ? std::to_string(o.timeToNotWritable->count()) + " ms" : "never")
              << ", lost careful " << o.carefulLost.size() << "/" << o.carefulAcked.size() << ", local "
              << o.localLost.size() << "/" << o.localAcked.size() << ", hostile " << o.hostileLost.size() << "/"
              << o.hostileAcked.size() << std::endl;
  }
  auto summary = [](const char* what, std::vector<long> v) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    std::cout << what << ": median " << v[v.size() / 2] << " ms, max " << v.back() << " ms (" << v.size()
              << " runs)\n";
  };
  std::cout << "session timeout " << sessionTimeoutMs << " ms, " << runs << " runs, " << failed << " failed\n";
  summary("cut -> first write on the new primary (read-write URL)", toNew);
  summary("cut -> /primary 503 on the old primary", toNotWritable);
  std::cout << "acknowledged rows lost: careful " << carefulLost << " of " << carefulAcked << ", synchronous_commit=local "
            << localLost << " of " << localAcked << ", BEGIN READ WRITE + synchronous_commit=local " << hostileLost
            << " of " << hostileAcked << "\n";
  return failed == 0 && carefulLost == 0 && localLost == 0 && hostileLost == 0 ? 0 : 1;
}
