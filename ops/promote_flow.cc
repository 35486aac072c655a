#include "ops/promote_flow.h"

#include <thread>

#include "ops/http_client.h"
#include "statemachine/promote_request.h"

namespace dugong::adm {
namespace {

// The last history record's reason, for explaining what a peer did with a request.
std::string lastHistoryReason(zk::Client& client) {
  auto h = client.history();
  if (!h || h->empty()) return "";
  auto j = nlohmann::json::parse(h->back().data, nullptr, false);
  if (j.is_object() && j.contains("reason") && j["reason"].is_string()) return j["reason"].get<std::string>();
  return "";
}

}  // namespace

Result<UpdateResult> writePromoteRequest(zk::Client& client, const nlohmann::json& request, int64_t generation,
                                         const std::string& reason) {
  return updateState(
      client,
      [&](ClusterState& s) -> Result<bool> {
        if (s.generation != generation) {
          return Error{"the generation changed (now " + std::to_string(s.generation) +
                       ") before the request was written; look at the cluster again"};
        }
        if (s.hasPromote() && validatePromote(s.promote, s, nowMs()).ok()) {
          return Error{"another promote request appeared: " + s.promote.dump()};
        }
        if (s.frozen()) return Error{"the cluster was frozen meanwhile"};
        if (auto v = validatePromote(request, s, nowMs()); !v) return Error{"the request no longer fits: " + v.error()};
        s.promote = request;
        return true;
      },
      reason);
}

PromoteWait waitForPromote(zk::Client& client, const nlohmann::json& request, ClusterState written,
                           const std::string& reason, const std::function<bool()>& stop) {
  const auto started = std::chrono::steady_clock::now();
  PromoteWait w;
  w.last = std::move(written);
  while (w.outcome == PromoteOutcome::kPending) {
    if (stop && stop()) {
      w.readError = "stopped while waiting";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto st = readClusterState(client);
    if (!st) {
      w.readError = st.error();
      // Keep trying until the request would have expired anyway.
      auto expire = parseTime(request["expireTime"].get<std::string>());
      if (expire && nowMs() > *expire + 10000) break;
      continue;
    }
    w.last = st->state;
    w.outcome = promoteOutcome(request, w.last, nowMs());
  }
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  switch (w.outcome) {
    case PromoteOutcome::kCarriedOut:
      w.message = "carried out after " + std::to_string(w.seconds).substr(0, 5) + " s: generation " +
                  std::to_string(w.last.generation) + ", primary " + w.last.primary.id + ", sync " +
                  (w.last.sync ? w.last.sync->id : std::string("none"));
      break;
    case PromoteOutcome::kRemoved: {
      std::string why = lastHistoryReason(client);
      w.message = "not carried out: the request was removed" + (why.empty() ? "" : " (last change: " + why + ")");
      break;
    }
    case PromoteOutcome::kExpired: {
      // Remove our own expired request, only if it is still exactly ours.
      auto c = updateState(
          client,
          [&](ClusterState& s) -> Result<bool> {
            if (s.promote != request) return false;
            s.promote = nullptr;
            return true;
          },
          reason);
      w.message = "not carried out: the request expired at " + request["expireTime"].get<std::string>() +
                  (c && c->written ? "; removed it" : "") + (c ? "" : "; removing it failed: " + c.error());
      break;
    }
    case PromoteOutcome::kPending:
      w.message = "outcome unknown: cannot read the cluster state (" + w.readError + ")";
      break;
  }
  return w;
}

std::optional<double> waitWritable(const PeerIdentity& peer, std::chrono::seconds timeout,
                                   const std::function<bool()>& stop) {
  auto url = agentUrl(peer);
  if (!url) return std::nullopt;
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < timeout && !(stop && stop())) {
    auto r = agent::httpGet(*url + "/primary", std::chrono::seconds(2));
    if (r && r->status == 200) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::nullopt;
}

}  // namespace dugong::adm
