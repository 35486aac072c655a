#include "ops/cluster.h"

#include <future>
#include <iostream>
#include <thread>

#include "ops/http_client.h"
#include "statemachine/time_format.h"

namespace dugong::adm {

Result<std::unique_ptr<zk::Client>> connectZk(const zk::ZkOptions& options, std::chrono::milliseconds timeout) {
  auto c = zk::Client::connect(options, timeout);
  if (!c) {
    return Error{"cannot reach ZooKeeper at " + options.hosts() + " within " +
                 std::to_string(timeout.count() / 1000) + " s: " + c.error()};
  }
  return std::move(c).value();
}

Result<StateRead> readClusterState(zk::Client& client, ClusterState::Formats formats) {
  auto node = client.readState();
  if (!node) return Error{"reading the cluster state: " + node.error()};
  if (!node->exists) {
    return Error{"no cluster at " + client.layout().root() + ": " + client.layout().state() +
                 " does not exist (check -c/--cluster and --root)"};
  }
  auto s = ClusterState::parse(node->data, formats);
  if (!s) return Error{"the cluster state at " + client.layout().state() + " is invalid: " + s.error()};
  return StateRead{*s, node->version};
}

EpochMs nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<ClusterView> fetchView(zk::Client& client, const std::string& cluster, bool agents,
                              std::chrono::milliseconds agentTimeout, ClusterState::Formats formats) {
  auto st = readClusterState(client, formats);
  if (!st) return Error{st.error()};
  auto active = client.activePeers();
  if (!active) return Error{"listing the active peers: " + active.error()};
  ClusterView v;
  v.cluster = cluster;
  v.root = client.layout().root();
  v.state = st->state;
  v.version = st->version;
  v.active = *active;
  v.peers = listPeers(v.state, v.active);
  v.now = nowMs();
  if (!agents) return v;
  std::vector<std::future<void>> jobs;
  for (auto& p : v.peers) {
    auto url = agentUrl(p.identity);
    if (!url) {
      p.agentError = "no status URL (backupUrl) in its identity";
      continue;
    }
    jobs.push_back(std::async(std::launch::async, [&p, u = *url, agentTimeout] {
      auto r = agent::httpGet(u + "/state", agentTimeout);
      if (!r) {
        p.agentError = r.error();
      } else if (r->status != 200) {
        p.agentError = u + "/state answered " + std::to_string(r->status);
      } else {
        auto j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded() || !j.is_object()) {
          p.agentError = u + "/state answered something that is not a JSON object";
        } else {
          p.status = std::move(j);
        }
      }
    }));
  }
  for (auto& j : jobs) j.get();
  return v;
}

std::map<std::string, std::string> electionDataById(const std::vector<zk::ElectionEntry>& nodes) {
  std::map<std::string, std::string> data;
  for (const auto& e : nodes) {
    if (e.identity) data[e.identity->id] = e.data;
  }
  return data;
}

Result<UpdateResult> updateState(zk::Client& client, const std::function<Result<bool>(ClusterState&)>& change,
                                 const std::string& reason, int attempts, ClusterState::Formats formats) {
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    auto st = readClusterState(client, formats);
    if (!st) return Error{st.error()};
    ClusterState next = st->state;
    auto decision = change(next);
    if (!decision) return Error{decision.error()};
    if (!*decision) return UpdateResult{false, st->state, st->version, attempt};
    if (auto valid = ClusterState::parse(next.serialize(), formats); !valid) {
      return Error{"the change would leave a state that peers refuse (" + valid.error() + "); nothing was written"};
    }
    auto w = client.putState(next, st->version, reason);
    if (w.ok) return UpdateResult{true, next, w.newVersion, attempt};
    if (!w.lostRace) {
      // The outcome may be unknown: look whether our state is what is there now.
      auto again = readClusterState(client, formats);
      if (again && again->state.serialize() == next.serialize() && again->version == st->version + 1) {
        return UpdateResult{true, next, again->version, attempt};
      }
      return Error{"writing the cluster state failed: " + w.error};
    }
    std::cerr << "dugong-adm: the cluster state changed while writing (attempt " << attempt << " of " << attempts
              << "); reading it again\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
  }
  return Error{"gave up after " + std::to_string(attempts) +
               " attempts: the cluster state kept changing under this write; nothing was written"};
}

}  // namespace dugong::adm
