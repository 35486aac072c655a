#include "ops/promote_check.h"

#include "statemachine/promote_request.h"
#include "statemachine/time_format.h"

namespace dugong::adm {
namespace {

// Tagged nofailover in its election node (the identity it publishes now).
bool noFailover(const ClusterView& view, const std::string& id) {
  const int i = indexOfPeer(view.active, id);
  return i >= 0 && view.active[static_cast<size_t>(i)].tags.nofailover;
}

}  // namespace

Result<nlohmann::json> buildPromoteRequest(const ClusterView& view, const PromoteArgs& a) {
  const ClusterState& s = view.state;
  if (a.role != "sync" && a.role != "async") {
    return Error{"role must be \"sync\" or \"async\", not \"" + a.role + "\" (the primary cannot be promoted)"};
  }
  if (a.expireSeconds < 1 || a.expireSeconds > 86400) return Error{"--expire must be from 1 to 86400 seconds"};
  if (a.role == "sync" && a.asyncIndex) return Error{"--async-index is only for promoting an async"};
  if (a.asyncIndex && *a.asyncIndex < 0) return Error{"--async-index must be >= 0"};
  if (s.frozen()) return Error{"the cluster is frozen; unfreeze it first (`dugong-adm unfreeze`)"};
  if (s.oneNodeWriteMode) return Error{"the cluster is in one-node-write mode: there is nothing to promote"};
  if (s.hasPromote() && validatePromote(s.promote, s, view.now).ok()) {
    return Error{"a promote request is pending already: " + s.promote.dump() +
                 " (wait for it, or remove it with `dugong-adm clear-promote`)"};
  }

  nlohmann::json req = {{"id", a.id}, {"role", a.role}};
  if (a.role == "sync" && s.quorum) {
    // Quorum mode (0079): any member; the set after it holds the other present members
    // and present untagged asyncs (decideQuorumTakeover), and must not be empty.
    if (!containsPeer(s.quorum->members, a.id)) {
      return Error{a.id + " is not a member of the synchronous set (" + peerIds(s.quorum->members) + ")"};
    }
    if (noFailover(view, a.id)) return Error{a.id + " is tagged nofailover: it never takes over"};
    bool filled = false;
    for (const auto& m : s.quorum->members) filled |= m.id != a.id && containsPeer(view.active, m.id);
    for (const auto& p : s.async) filled |= containsPeer(view.active, p.id) && !noFailover(view, p.id);
    if (!filled) {
      return Error{"no other member or async is in ZooKeeper to join the synchronous set, so " + a.id +
                   " would not take over"};
    }
  } else if (a.role == "sync") {
    if (!s.sync || s.sync->id != a.id) {
      return Error{a.id + " is not the sync (the sync is " + (s.sync ? s.sync->id : std::string("nobody")) + ")"};
    }
    if (noFailover(view, a.id)) return Error{a.id + " is tagged nofailover: it never takes over"};
    bool asyncPresent = false, eligible = false;
    for (const auto& p : s.async) {
      asyncPresent |= containsPeer(view.active, p.id);
      eligible |= containsPeer(view.active, p.id) && !noFailover(view, p.id);
    }
    if (!asyncPresent) return Error{"no async is in ZooKeeper to become the new sync, so the sync would not take over"};
    if (!eligible) {
      return Error{"every async in ZooKeeper is tagged nofailover: none can become the new sync, so the sync would not "
                   "take over"};
    }
  } else if (s.quorum && indexOfPeer(s.async, a.id) >= 0) {  // no async promotion in quorum mode (0079)
    return Error{a.id + " is an async, which in quorum mode takes over only once it is a member of the synchronous "
                        "set (" + peerIds(s.quorum->members) + "): promote a member, or raise replication.size first"};
  } else {
    int i = indexOfPeer(s.async, a.id);
    if (i < 0) return Error{a.id + " is not an async"};
    if (a.asyncIndex && *a.asyncIndex != i) {
      return Error{a.id + " is async[" + std::to_string(i) + "], not async[" + std::to_string(*a.asyncIndex) + "]"};
    }
    if (i == 0 && noFailover(view, a.id)) {
      return Error{a.id + " is tagged nofailover: it is never made the sync (it could then take over)"};
    }
    if (i == 0 && !containsPeer(view.active, s.primary.id)) {
      return Error{"the primary " + s.primary.id + " is not in ZooKeeper to carry the request out"};
    }
    req["asyncIndex"] = i;
  }

  const PeerView* p = view.find(a.id);
  if (!p || !p->active) return Error{a.id + " is not in ZooKeeper"};
  if (!p->reachable()) {
    return Error{"cannot check " + a.id + ": its agent does not answer" +
                 (p->agentError.empty() ? "" : " (" + p->agentError + ")")};
  }
  if (!pgOnline(*p)) return Error{a.id + ": postgres is not online"};
  const PeerView* up = view.upstreamOf(a.id);
  if (!up || !up->reachable()) {
    return Error{"cannot check the lag of " + a.id + ": its upstream " + (up ? up->identity.id : std::string("?")) +
                 " does not answer"};
  }
  auto row = replicationRow(*up, a.id);
  if (!row || row->value("state", std::string()) != "streaming") {
    return Error{a.id + " is not streaming from " + up->identity.id};
  }
  if (a.role == "sync" && row->value("syncState", std::string()) != synchronousState(s)) {
    return Error{a.id + " does not stream synchronously from " + up->identity.id};
  }
  auto lag = lagBytes(*up, a.id);
  if (!lag) return Error{"cannot tell how far " + a.id + " lags behind " + up->identity.id};
  if (*lag > a.lagToIgnore) {
    return Error{a.id + " lags " + std::to_string(*lag) + " bytes behind " + up->identity.id + ", more than " +
                 std::to_string(a.lagToIgnore) + " (--lag-to-ignore)"};
  }

  req["generation"] = s.generation;
  req["expireTime"] = formatIso8601(view.now + a.expireSeconds * 1000);
  return req;
}

const char* outcomeName(PromoteOutcome o) {
  switch (o) {
    case PromoteOutcome::kPending:
      return "pending";
    case PromoteOutcome::kCarriedOut:
      return "carried out";
    case PromoteOutcome::kRemoved:
      return "removed without being carried out";
    case PromoteOutcome::kExpired:
      return "expired";
  }
  return "?";
}

PromoteOutcome promoteOutcome(const nlohmann::json& request, const ClusterState& s, EpochMs now) {
  const std::string id = request.value("id", std::string());
  const std::string role = request.value("role", std::string());
  const int64_t generation = request.value("generation", int64_t{0});
  bool moved = false;
  if (role == "sync") {
    moved = s.generation > generation && s.primary.id == id;
  } else {
    int64_t i = request.value("asyncIndex", int64_t{-1});
    if (i == 0) {
      moved = s.generation > generation && s.sync && s.sync->id == id;
    } else if (i > 0) {
      moved = static_cast<int64_t>(indexOfPeer(s.async, id)) == i - 1;
    }
  }
  if (moved) return PromoteOutcome::kCarriedOut;
  if (s.promote != request) return PromoteOutcome::kRemoved;
  auto expire = parseTime(request.value("expireTime", std::string()));
  if (!expire || now > *expire) return PromoteOutcome::kExpired;
  return PromoteOutcome::kPending;
}

}  // namespace dugong::adm
