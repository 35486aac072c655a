#include "tests/e2e/zk_maintenance_scenario.h"

namespace dugong::e2e {

ZkMaintenanceCluster::ZkMaintenanceCluster(int sessionTimeoutMs, bool noLease, bool noFailsafe,
                                           const std::string& extraConfig) {
  HarnessOptions o;
  o.extraConfig = extraConfig;
  o.peers = 3;
  o.sessionTimeoutMs = sessionTimeoutMs;
  o.zookeeper.servers = 3;
  if (noLease) o.zkConfig += "  lease: false\n";
  if (noFailsafe) o.zkConfig += "  failsafe: off\n";
  h_ = std::make_unique<Harness>(o);
}

ZkMaintenanceCluster::~ZkMaintenanceCluster() {
  done_ = true;
  if (writer_.joinable()) writer_.join();
}

bool ZkMaintenanceCluster::start() {
  h_->startAll();
  primary_ = h_->waitForHealthyCluster(2, std::chrono::seconds(180));
  if (primary_ < 0) {
    error_ = "no healthy cluster";
    return false;
  }
  if (auto r = h_->sql(primary_, "CREATE TABLE maint (id int PRIMARY KEY)"); !r) {
    error_ = "create table: " + r.error();
    return false;
  }
  writer_ = std::thread([this] { write(); });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  return true;
}

void ZkMaintenanceCluster::write() {
  for (int id = 1; !done_; ++id) {
    if (h_->sql(primary_, "INSERT INTO maint VALUES (" + std::to_string(id) + ")", std::chrono::seconds(5))) {
      const auto now = std::chrono::steady_clock::now();
      std::lock_guard lock(mu_);
      if (last_) maxGap_ = std::max(maxGap_, now - *last_);
      last_ = now;
      ++acked_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string ZkMaintenanceCluster::postmasterStart() {
  auto r = h_->sql(primary_, "SELECT pg_postmaster_start_time()::text");
  return r && !r->rows.empty() ? r->rows[0][0].value_or("") : std::string("unreadable");
}

template <class Fault>
MaintenanceOutcome ZkMaintenanceCluster::measure(Fault fault) {
  MaintenanceOutcome out;
  // Read as quorum mode reads it too (format 2), so that a quorum cluster's generation
  // is compared, not two unreadable states.
  const auto state = h_->zkState(ClusterState::Formats::kSyncAndQuorum);
  const int64_t generation = state ? state->generation : -1;
  const std::string started = postmasterStart();
  {
    std::lock_guard lock(mu_);
    maxGap_ = {};
    acked_ = 0;
    lateFrom_.reset();
    lateRows_ = 0;
  }
  fault(h_->zookeeper());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  {
    std::lock_guard lock(mu_);
    out.maxGapMs = std::chrono::duration_cast<std::chrono::milliseconds>(maxGap_).count();
    out.rows = acked_;
    out.rowsLate = lateRows_;
  }
  const auto after = h_->zkState(ClusterState::Formats::kSyncAndQuorum);
  out.newGeneration = !after || after->generation != generation;
  out.postgresRestarted = postmasterStart() != started;
  out.samePrimary = h_->writablePrimary() == primary_;
  return out;
}

MaintenanceOutcome ZkMaintenanceCluster::leaderKill() {
  return measure([](dugong::testing::ZooKeeperCluster& zk) {
    const auto leader = zk.leader();
    if (!leader) return;
    zk.kill(*leader);
    zk.waitLeader(std::chrono::seconds(60));
    zk.start(*leader);
  });
}

MaintenanceOutcome ZkMaintenanceCluster::quorumLoss(std::chrono::milliseconds lost) {
  return measure([this, lost](dugong::testing::ZooKeeperCluster& zk) {
    const auto leader = zk.waitLeader(std::chrono::seconds(60));
    const int first = leader.value_or(0);
    const int second = (first + 1) % zk.size();
    zk.kill(first);
    zk.kill(second);
    const auto back = std::chrono::steady_clock::now() + lost;
    std::this_thread::sleep_until(back - std::chrono::seconds(1));
    {
      std::lock_guard lock(mu_);
      lateFrom_ = acked_;
    }
    std::this_thread::sleep_until(back);
    {
      std::lock_guard lock(mu_);
      lateRows_ = acked_ - *lateFrom_;
    }
    zk.start(first);
    zk.start(second);
    zk.waitLeader(std::chrono::seconds(60));
  });
}

MaintenanceOutcome ZkMaintenanceCluster::rollingRestart() {
  return measure([](dugong::testing::ZooKeeperCluster& zk) {
    const auto leader = zk.waitLeader(std::chrono::seconds(60));
    for (int s = 0; s < zk.size(); ++s) {
      if (!leader || s != *leader) zk.restart(s);
    }
    if (leader) zk.restart(*leader);
    zk.waitLeader(std::chrono::seconds(60));
  });
}

}  // namespace dugong::e2e
