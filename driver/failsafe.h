// The failsafe (docs/design.md "Quorum loss: the sync's promise"): a primary whose
// ZooKeeper lease is about to end asks its sync, the only peer that can take over from
// it, to promise not to take over for a while; the sync promises only while it cannot
// reach ZooKeeper either, and keeps the promise; the primary writes on until a little
// before the promise can end, timed from when it sent the request. These are the pure
// rules; the driver (driver/core_failsafe.cc) carries them out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "statemachine/action.h"
#include "statemachine/cluster_state.h"

namespace dugong::driver {

// What a primary asks its sync (HTTP: POST /failsafe).
struct FailsafeRequest {
  FailsafeRequest() = default;
  FailsafeRequest(int64_t gen, std::string primary, int64_t duration)
      : generation(gen), primaryId(std::move(primary)), durationMs(duration) {}
  static FailsafeRequest releaseFor(int64_t gen, std::string primary, std::string promoteRequest) {
    FailsafeRequest r(gen, std::move(primary), 0);
    r.release = true;
    r.promote = std::move(promoteRequest);
    return r;
  }

  int64_t generation = 0;
  std::string primaryId;
  int64_t durationMs = 0;  // the promise asked for: no takeover for this long after receipt
  // Instead a release (durationMs 0): the primary stopped postgres to hand over to its
  // sync for the promote request `promote` (its JSON text), writes no more under any
  // promise, and frees the sync from every promise it holds (decideFailsafeRelease).
  bool release = false;
  std::string promote;
};

struct FailsafeAnswer {
  bool granted = false;
  std::string reason;  // in plain words, both ways
};

// The longest promise a peer gives (a request for more is refused: a bound on how long
// a takeover can be held back).
constexpr int64_t kFailsafeMaxDurationMs = 60000;

// What the asked peer knows when it decides.
struct FailsafeGranterView {
  bool enabled = false;                 // zookeeper.failsafe on here too
  std::string selfId;
  const ClusterState* state = nullptr;  // its view of the cluster state (nullptr: none)
  // Its own round trips through the ZooKeeper leader: seen at all, and one sent within
  // the last interval and a half confirmed. A peer that reaches ZooKeeper promises
  // nothing: the normal rules apply (the primary stops at its lease's end).
  bool leaseInUse = false;
  bool reachesZooKeeper = false;
  // A takeover of its own has begun (a fence asked for or held, a state write in flight
  // or of unknown outcome): too late to promise.
  bool takingOver = false;
  // The longest promise it gives: what a new run of its agent holds at its start when
  // it finds no record of the promises of this one (its own failsafe length, the session
  // timeout). A longer request is refused, not granted for less: a primary of an older
  // release times its permission from the length it asked for.
  int64_t maxDurationMs = kFailsafeMaxDurationMs;
  // The promote request of a switchover to this peer that it sees valid (its JSON text;
  // empty: none). Such a peer promises nothing (it is about to take over), and believes
  // a release only for that request.
  std::string switchoverToSelf;
};

// Whether a peer whose last confirmed round trip through the leader was sent at
// `lastSentAtMs` reaches ZooKeeper at `nowMs`, round trips being `intervalMs` apart:
// the one sent after it should have been confirmed by now.
bool reachesZooKeeper(int64_t lastSentAtMs, int64_t intervalMs, int64_t nowMs);

// The sync's decision on a request.
FailsafeAnswer decideFailsafeGrant(const FailsafeRequest& request, const FailsafeGranterView& view);

// The sync's decision on a release: it frees this peer from its promises only when it
// comes from the primary of the generation it sees, with itself the sync, for the
// switchover to itself that it sees requested. Whatever this peer promised, and whenever
// (an earlier run of its agent included), it promised it to that primary: only the sync
// of a generation promises, and only its own takeover can end the generation of a
// primary it promised (a sync replacement keeps the primary). And no promise it gave is
// newer than the release: it gives none while it sees that request, and the primary asks
// for none while it hands over for it (docs/isolated-primary.md, "A planned switchover
// is not held").
FailsafeAnswer decideFailsafeRelease(const FailsafeRequest& request, const FailsafeGranterView& view);

// The promise after a grant received at `receivedAtMs` (the sync's monotonic clock):
// it only ever extends.
int64_t extendPromise(std::optional<int64_t> promisedUntilMs, int64_t receivedAtMs, int64_t durationMs);

// The primary's permission for a grant of `durationMs` asked at `sentAtMs` (its
// monotonic clock): postgres may acknowledge commits until this moment (shut down at
// it, writes stopped writeStopLead before), which comes before the promise can end
// however the two clocks' rates differ (within 1 %, as the lease assumes) and however
// late the request arrived: sentAt + D - D/100 - stopMargin.
int64_t failsafePermissionEndMs(int64_t sentAtMs, int64_t durationMs, int64_t stopMarginMs);

// Quorum mode (docs/decisions/0079 4.7): the primary asks every member of the set, and
// may write while k of them promise: its permission ends at the k-th latest of the
// per-member ends (each failsafePermissionEndMs of its own request), nullopt with fewer
// than k grants. k promising members leave N - k, fewer than the N - k + 1 fenced
// reports a takeover needs. In sync mode k is 1 and the one member is the sync.
std::optional<int64_t> kthLatestGrant(std::vector<int64_t> ends, int k);
// The peers a primary asks for promises, and releases at a switchover: those that can
// take over from it, the sync, or in quorum mode every member of the set.
// REQUIRES: `state` has a sync or a set.
PeerList promisers(const ClusterState& state);

class Core;

// The driver's failsafe (driver/core_failsafe.cc, which alone changes it; the other
// protocols ask its queries). As primary: the permission's end and the generation it was
// asked in. As sync: the promise's end, and the takeover it holds back.
class Failsafe {
 public:
  std::optional<int64_t> permittedUntil() const { return permittedUntil_; }
  int64_t generation() const { return generation_; }  // of the permission
  std::optional<int64_t> promisedUntil() const { return promisedUntil_; }
  // A new session's lease replaces the old one's, and with it the permission (lease.cc).
  void forgetPermission() {
    permittedUntil_.reset();
    grants_.clear();
  }

 private:
  friend class Core;  // core_failsafe.cc
  std::optional<int64_t> permittedUntil_;
  int64_t generation_ = 0;
  // Per peer asked (the sync, or each member in quorum mode): the permission its grants
  // give, for the generation and session they were asked in.
  struct Grant {
    int64_t endMs = 0;
    int64_t generation = 0;
    int64_t session = 0;
  };
  std::map<std::string, Grant> grants_;
  std::optional<int64_t> promisedUntil_;
  std::optional<Action> heldTakeover_;
  // A release that came before this peer saw the switchover it was sent for: carried out
  // once it sees that request (in its generation), forgotten with the generation.
  std::optional<FailsafeRequest> pendingRelease_;
};

}  // namespace dugong::driver
