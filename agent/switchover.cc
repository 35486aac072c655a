#include "agent/switchover.h"

#include <thread>

#include <spdlog/spdlog.h>

#include "agent/http_api.h"
#include "tools/adm/promote_flow.h"

namespace dugong::agent {
namespace {

constexpr int kMaxSteps = 16;  // async[N] needs N + 2 steps
constexpr auto kZkTimeout = std::chrono::seconds(10);
constexpr auto kWritableTimeout = std::chrono::seconds(60);
// After a step, the peers reconfigure postgres (the new sync streams synchronously
// only once the primary has applied the generation): a later step's checks are retried
// this long, every 500 ms.
constexpr auto kSettleTimeout = std::chrono::seconds(60);

}  // namespace

bool Switchover::start(const std::string& candidate, HttpServer::Respond respond) {
  if (running_.exchange(true)) return false;
  if (worker_.joinable()) worker_.join();  // the previous one, finished
  stopping_ = false;
  worker_ = std::thread([this, candidate, respond = std::move(respond)] {
    HttpReply reply = run(candidate);
    running_ = false;
    respond(std::move(reply));
  });
  return true;
}

HttpReply Switchover::run(const std::string& candidate) {
  auto client = adm::connectZk(zk_, kZkTimeout);
  if (!client) return jsonError(503, client.error());
  nlohmann::json steps = nlohmann::json::array();
  auto failed = [&](int status, const std::string& reason) {
    spdlog::warn("switchover to {}: {}", candidate, reason);
    HttpReply r = jsonError(status, reason);
    auto j = nlohmann::json::parse(r.body);
    j["steps"] = steps;
    r.body = j.dump() + "\n";
    return r;
  };
  auto settleUntil = std::chrono::steady_clock::now();
  for (int step = 0; step < kMaxSteps;) {
    const bool first = step == 0;
    // A later step's refusal: the cluster may still be settling from the last one.
    auto retry = [&] {
      if (first || stopping_ || std::chrono::steady_clock::now() > settleUntil) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      return true;
    };
    auto view = adm::fetchView(**client, zk_.cluster, true);
    if (!view) return failed(503, view.error());
    const ClusterState& s = view->state;
    if (s.primary.id == candidate) {
      if (first) return failed(409, candidate + " is the primary already");
      auto writable = adm::waitWritable(s.primary, kWritableTimeout, [this] { return stopping_.load(); });
      spdlog::info("switchover to {}: done, {}", candidate, writable ? "it is the writable primary" : "not writable yet");
      return {writable ? 200 : 503, "application/json",
              nlohmann::json({{"primary", candidate}, {"writable", writable.has_value()}, {"steps", steps}}).dump() +
                  "\n"};
    }
    adm::PromoteArgs args;
    args.id = candidate;
    if (s.sync && s.sync->id == candidate) {
      args.role = "sync";
    } else if (containsPeer(s.async, candidate)) {
      args.role = "async";
    } else if (containsPeer(s.deposed, candidate)) {
      return failed(first ? 409 : 503, candidate + " is deposed: it must be rebuilt before it can take over");
    } else {
      return failed(first ? 404 : 503, "no peer " + candidate + " in the cluster (primary " + s.primary.id + ", sync " +
                                           (s.sync ? s.sync->id : std::string("none")) + ")");
    }
    auto request = adm::buildPromoteRequest(*view, args);
    if (!request && retry()) continue;
    if (!request) return failed(first ? 409 : 503, "not promoting " + candidate + ": " + request.error());
    const std::string reason =
        "POST /switchover to " + candidate + " (step " + std::to_string(step + 1) + "), by the agent of " + self_;
    auto written = adm::writePromoteRequest(**client, *request, s.generation, reason);
    if (!written) return failed(first ? 409 : 503, "not promoting " + candidate + ": " + written.error());
    spdlog::info("switchover to {}: step {}: promote request written ({} is {}): {}", candidate, step + 1, candidate,
                 args.role, request->dump());
    auto waited = adm::waitForPromote(**client, *request, written->state,
                                      "POST /switchover: removing its expired request, by the agent of " + self_,
                                      [this] { return stopping_.load(); });
    steps.push_back({{"request", *request}, {"outcome", adm::outcomeName(waited.outcome)}, {"message", waited.message}});
    if (waited.outcome != adm::PromoteOutcome::kCarriedOut) return failed(503, waited.message);
    spdlog::info("switchover to {}: step {}: {}", candidate, step + 1, waited.message);
    ++step;
    settleUntil = std::chrono::steady_clock::now() + kSettleTimeout;
  }
  return failed(503, "gave up after " + std::to_string(kMaxSteps) + " steps");
}

}  // namespace dugong::agent
