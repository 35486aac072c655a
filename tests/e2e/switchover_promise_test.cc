// A planned switchover right after a ZooKeeper quorum loss, and right after the sync's
// agent restarted, is not held by the sync's promise (issue 40): during the loss the
// primary writes on under the promise of its sync (zookeeper.failsafe, the default),
// which still runs when ZooKeeper is back; a started agent holds the promise it
// recorded. The old primary stops postgres for the switchover and its stream ends, so
// the sync takes over at once (docs/isolated-primary.md, "A planned switchover is not
// held"). Before that rule a campaign saw 3.8 and 4.1 s of writes lost to such holds.
//
// What is asserted: each switchover is carried out at the first `dugong-adm switchover`
// (none refused for a stale view of the sync's stream), no agent logs that it held a
// takeover back for a promise, and every acknowledged row is on the new primary. The
// longest time between two acknowledgements around each switchover is printed, never
// asserted, for a writer that connects per row and one that keeps its connection, with
// that of a third switchover with no promise about as the baseline.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pg/command.h"
#include "tests/e2e/careful_writer.h"
#include "tests/e2e/cluster_harness.h"
#include "tests/support/test_env.h"

namespace dugong::e2e {
namespace {

using namespace std::chrono_literals;

class SwitchoverUnderAPromise : public ::testing::Test {
 protected:
  void SetUp() override {
    HarnessOptions o;
    o.cluster = "swpromise";
    o.ownZooKeeper = true;  // killed and started again: a quorum loss every peer sees
    h_ = std::make_unique<Harness>(o);
    h_->startAll();
    ASSERT_GE(h_->waitForHealthyCluster(2, 180s), 0) << h_->describe();
    const int primary = h_->writablePrimary();
    ASSERT_TRUE(h_->sql(primary, "CREATE TABLE acked (id int PRIMARY KEY)").ok());
    writer_ = std::make_unique<CarefulWriter>(h_->multiHostConninfo());
    ASSERT_TRUE(h_->waitFor([&] { return writer_->ackedSince(1) >= 5; }, 60s)) << "the writer gets no acknowledgement";
  }
  void TearDown() override {
    if (writer_) writer_->stop();
    if (HasFailure() && h_) std::cerr << h_->describe();
  }

  // ZooKeeper lost for `span` by every peer, then back; the primary writes on under its
  // sync's promise meanwhile.
  void quorumLoss(std::chrono::milliseconds span) {
    h_->zookeeper().kill(0);
    std::this_thread::sleep_for(span);
    h_->zookeeper().start(0);
  }

  // `dugong-adm switchover` to the sync, at once; returns the new primary's index.
  int switchOverToTheSync(const std::string& what) {
    auto state = h_->zkState();
    if (!state || !state->sync) {
      ADD_FAILURE() << what << ": no sync in the state";
      return -1;
    }
    const std::string sync = state->sync->id;
    const int firstRow = writer_->nextId();
    // Two more writers for this switchover's gap alone, their ids apart from the first's:
    // one opens a connection per row, the other keeps its connection as an application's
    // pool does (and opens one again, through the same multi-host string, after a failure).
    gapWriterIds_ += 2000000;
    const int keptIds = gapWriterIds_ + 1000000;
    CarefulWriter gapWriter(h_->multiHostConninfo(), gapWriterIds_);
    CarefulWriter keptWriter(h_->multiHostConninfo(), keptIds, CarefulWriter::Connections::kKept);
    // Its gap spans the switchover only once it has written before it: started with the
    // switchover, its first acknowledgement may come after it, and the gap would be none.
    EXPECT_TRUE(h_->waitFor([&] { return gapWriter.ackedSince(gapWriterIds_) >= 3 && keptWriter.ackedSince(keptIds) >= 3; },
                            60s))
        << what << ": the gap's writers get no acknowledgement before the switchover";
    std::vector<size_t> logStart;  // this switchover's part of each agent's log
    for (int i = 0; i < h_->size(); ++i) logStart.push_back(dugong::testing::fileText(h_->peer(i).logPath).size());
    pg::CommandSpec spec;
    spec.argv = {DUGONG_ADM_BINARY, "-z", h_->zkConnect(), "-c", h_->options().cluster, "switchover", "--wait-writable", "120"};
    spec.timeout = 180s;
    // At once: a sync whose stream the primary's last sample (a second old at most) does
    // not show yet is waited for by dugong-adm itself, not refused.
    pg::CommandResult r = pg::runCommand(spec);
    EXPECT_TRUE(r.ok()) << what << ": the switchover failed (exit " << r.exitCode << "):\n" << r.output;
    const bool moved = h_->waitFor([&] { return h_->writablePrimary() == h_->indexOf(sync); }, 60s);
    EXPECT_TRUE(moved) << what << ": " << sync << " is not the writable primary";
    EXPECT_TRUE(h_->waitFor(
        [&] {
          return gapWriter.ackedSince(gapWriterIds_) >= 5 && keptWriter.ackedSince(keptIds) >= 5 &&
                 writer_->ackedSince(firstRow) >= 5;
        },
        60s))
        << what << ": no writes after the switchover";
    gapWriter.stop();
    keptWriter.stop();
    for (CarefulWriter* w : {&gapWriter, &keptWriter}) {
      const std::set<int> acked = w->acked();
      gapAcked_.insert(acked.begin(), acked.end());
    }
    std::cout << "[switchover] " << what << ": longest time between two acknowledgements "
              << gapWriter.longestGap().count() << " ms (a connection per row), " << keptWriter.longestGap().count()
              << " ms (a kept connection)\n";
    // No takeover held for a promise's length: a sync that could not see the old
    // primary's stream end (none when its wait began: its agent just started, or its WAL
    // receiver between two connections) holds it until the old primary's release, which
    // follows the old primary's stop that every switchover waits for (0087).
    for (int i = 0; i < h_->size(); ++i) {
      const std::string log = dugong::testing::fileText(h_->peer(i).logPath).substr(logStart[static_cast<size_t>(i)]);
      for (size_t held = log.find("holding this takeover's"); held != std::string::npos;
           held = log.find("holding this takeover's", held + 1)) {
        const size_t ended = log.find("the promise has ended: taking over", held);
        const size_t released = log.find("released it from its promise", held);
        EXPECT_TRUE(released != std::string::npos && released < ended)
            << what << ": " << h_->peer(i).id << " held a switchover's takeover back for a promise, not ended by the "
            << "old primary's release:\n"
            << log.substr(held, 2000);
        if (released < ended) std::cout << "[switchover] " << what << ": held until the old primary's release\n";
      }
    }
    return moved ? h_->indexOf(sync) : -1;
  }

  // The first writer's rows and every gap writer's.
  void everyAcknowledgedRowIsOn(int primary) {
    std::set<int> acked = writer_->acked();
    acked.insert(gapAcked_.begin(), gapAcked_.end());
    const std::set<int> there = h_->intColumn(primary, "SELECT id FROM acked");
    size_t lost = 0;
    for (int id : acked) lost += there.count(id) == 0;
    EXPECT_EQ(lost, 0u) << lost << " acknowledged rows of " << acked.size() << " are not on the primary";
  }

  std::unique_ptr<Harness> h_;
  std::unique_ptr<CarefulWriter> writer_;
  int gapWriterIds_ = 0;
  std::set<int> gapAcked_;
};

TEST_F(SwitchoverUnderAPromise, RightAfterAQuorumLossAndAfterTheSyncsAgentRestarted) {
  // 1. ZooKeeper lost for longer than a session timeout: the sync promises, the primary
  //    writes on; back, and a switchover at once, within the promise.
  quorumLoss(std::chrono::milliseconds(2 * h_->options().sessionTimeoutMs));
  ASSERT_GE(h_->waitForHealthyCluster(2, 120s), 0) << h_->describe();
  const int first = switchOverToTheSync("after a quorum loss");
  ASSERT_GE(first, 0);
  ASSERT_GE(h_->waitForHealthyCluster(2, 120s), 0) << h_->describe();

  // 2. Another loss, then the sync's agent restarted (it holds the promise it recorded),
  //    and a switchover at once.
  quorumLoss(std::chrono::milliseconds(2 * h_->options().sessionTimeoutMs));
  ASSERT_GE(h_->waitForHealthyCluster(2, 120s), 0) << h_->describe();
  auto state = h_->zkState();
  ASSERT_TRUE(state && state->sync);
  const int sync = h_->indexOf(state->sync->id);
  h_->stopAgent(sync);
  h_->startAgent(sync);
  ASSERT_GE(h_->waitForHealthyCluster(2, 120s), 0) << h_->describe();
  const int second = switchOverToTheSync("after the sync's agent restarted");
  ASSERT_GE(second, 0);
  ASSERT_GE(h_->waitForHealthyCluster(2, 120s), 0) << h_->describe();

  // 3. The same measure of a switchover with no promise about (a baseline for the gaps).
  const int third = switchOverToTheSync("with no promise (the baseline)");
  ASSERT_GE(third, 0);
  writer_->stop();
  everyAcknowledgedRowIsOn(third);
}

}  // namespace
}  // namespace dugong::e2e
