#include "zk/source_watch.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "statemachine/cluster_state.h"
#include "statemachine/time_format.h"
#include "zk/client.h"

namespace dugong::zk {

SourceObservation observeSource(const Result<StateNode>& state, const Result<PeerList>& present,
                                const std::string& lastGood, const std::string& since) {
  SourceObservation seen;
  const std::string error = !state ? state.error() : !present ? present.error() : std::string();
  if (!error.empty()) {
    seen.lastSeen = "unreachable since " + since + ": " + error + (lastGood.empty() ? "" : "; last seen " + lastGood);
    return seen;
  }
  seen.reachable = true;
  if (!state->exists) {
    seen.lastSeen = "no cluster state";
    return seen;
  }
  auto parsed = ClusterState::parse(state->data, ClusterState::Formats::kAll);
  if (!parsed) {
    seen.lastSeen = "its cluster state cannot be read: " + parsed.error();
    return seen;
  }
  seen.state = ObservedSourceState::of(parsed.value());
  seen.primaryPresent = containsPeer(present.value(), parsed->primary.id);
  return seen;
}

std::string describeObservation(const SourceObservation& seen) {
  if (!seen.reachable || !seen.state) return "";
  const ObservedSourceState& st = *seen.state;
  return std::string(st.standby ? "its standby leader " : "its primary ") + st.primary +
         (seen.primaryPresent ? " (present)" : " (absent)") + ", sync " + st.sync.value_or("none") + ", generation " +
         std::to_string(st.generation);
}

SourceWatch::SourceWatch(StandbySource source, std::optional<DigestAuth> auth, int intervalMs,
                         std::function<void(SourceObservation)> onSeen)
    : source_(std::move(source)), auth_(std::move(auth)), intervalMs_(intervalMs), onSeen_(std::move(onSeen)) {
  thread_ = std::thread([this] { run(); });
}

SourceWatch::~SourceWatch() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void SourceWatch::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

bool SourceWatch::ended() const {
  std::lock_guard lock(mu_);
  return ended_;
}

void SourceWatch::run() {
  watch();
  std::lock_guard lock(mu_);
  ended_ = true;
}

void SourceWatch::watch() {
  ZkOptions options;
  options.connectString = source_.zookeeperConnect();
  options.chroot = source_.chroot;
  options.cluster = source_.cluster;
  options.root = source_.root;
  options.auth = auth_;
  options.lease = false;
  const auto timeout = std::chrono::milliseconds(std::max(1000, intervalMs_ * 2));
  std::unique_ptr<Client> client;
  std::string lastKey, lastGood, since;
  bool first = true;
  while (true) {
    Result<StateNode> state = Error{"not connected"};
    Result<PeerList> present = Error{"not connected"};
    if (!client) {
      auto c = Client::connect(options, timeout);
      if (c) {
        client = std::move(c).value();
      } else {
        state = Error{"cannot connect to " + options.hosts() + ": " + c.error()};
      }
    }
    if (client) {
      state = client->readState();
      present = state ? client->activePeers() : Result<PeerList>(Error{state.error()});
      if (!state || !present) client.reset();  // a new session next time
    }
    const bool reachable = state && present;
    const std::string now = formatIso8601(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
    if (reachable) {
      since.clear();
    } else if (since.empty()) {
      since = now;
    }
    SourceObservation seen = observeSource(state, present, lastGood, since);
    if (seen.reachable) lastGood = describeObservation(seen);
    // What changes the decisions: reachable or not, the state's bytes, its primary's presence.
    const std::string key = std::string(seen.reachable ? "1" : "0") + (reachable && state->exists ? state->data : "") +
                            (seen.primaryPresent ? "p" : "-");
    // Under the lock, so that nothing is seen after stop() has returned.
    std::unique_lock lock(mu_);
    if (stopping_) return;
    if (first || key != lastKey) {
      first = false;
      lastKey = key;
      if (seen.reachable) {
        spdlog::info("standby source {}: {}", source_.describe(),
                     seen.state ? describeObservation(seen) : seen.lastSeen);
      } else {
        spdlog::warn("standby source {}: {}", source_.describe(), seen.lastSeen);
      }
      onSeen_(seen);
    }
    if (cv_.wait_for(lock, std::chrono::milliseconds(intervalMs_), [this] { return stopping_; })) return;
  }
}

}  // namespace dugong::zk
