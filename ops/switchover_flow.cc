#include "ops/switchover_flow.h"

#include <thread>

#include "ops/cluster.h"
#include "ops/promote_check.h"
#include "ops/promote_flow.h"

namespace dugong::adm {
namespace {

constexpr int kMaxSteps = 16;  // async[N] needs N + 2 requests
constexpr auto kSettlePoll = std::chrono::milliseconds(500);
// The upstream's agent samples pg_stat_replication once a second (its GET /state): a
// candidate that streams may not show so in a sample taken a moment before. The first
// step's refusal for that waits this long for a fresher sample (two samples and the
// time to read them), looking again every kFreshStreamPoll.
constexpr auto kFreshStreamWait = std::chrono::milliseconds(2500);
constexpr auto kFreshStreamPoll = std::chrono::milliseconds(200);

SwitchoverDone refused(SwitchoverDone d, int status, std::string error) {
  d.status = status;
  d.error = std::move(error);
  return d;
}

// The first step: the target, and the promote request that starts it (or the refusal).
struct FirstStep {
  SwitchoverDone done;
  std::optional<nlohmann::json> request;
};

FirstStep planFirst(const ClusterView& view, const SwitchoverAsk& ask) {
  FirstStep f;
  auto plan = planSwitchover(view.state, ask);
  const PeerIdentity* sync = firstSync(view.state);
  f.done.candidate = ask.candidate.value_or(sync ? sync->id : "");
  if (!plan.target) {
    f.done = refused(f.done, plan.refusal.status, plan.refusal.reason);
    return f;
  }
  f.done.candidate = plan.target->id;
  f.done.requests = plan.target->requests;
  PromoteArgs args;
  args.id = plan.target->id;
  args.role = plan.target->role;
  auto request = buildPromoteRequest(view, args);
  if (!request) {
    f.done = refused(f.done, 409, "not switching over to " + args.id + ": " + request.error());
    return f;
  }
  f.request = *request;
  return f;
}

// The candidate's upstream does not show it streaming (synchronously, for the sync) in
// its agent's last sample: a refusal that a fresher sample may lift.
bool streamNotSeen(const ClusterView& view, const SwitchoverAsk& ask) {
  auto plan = planSwitchover(view.state, ask);
  if (!plan.target) return false;
  const PeerView* up = view.upstreamOf(plan.target->id);
  if (!up || !up->reachable()) return false;
  auto row = replicationRow(*up, plan.target->id);
  if (!row || row->value("state", std::string()) != "streaming") return true;
  return plan.target->role == "sync" && row->value("syncState", std::string()) != synchronousState(view.state);
}

// The first step against the cluster as it is; a refusal because the candidate's stream
// is not seen is final only once a fresher sample still does not show it (bounded by
// kFreshStreamWait). `view`: the view the step was planned on.
FirstStep planFirstFresh(zk::Client& client, const std::string& cluster, const SwitchoverAsk& ask,
                         const std::function<bool()>& stopped, std::optional<ClusterView>& view) {
  const auto until = std::chrono::steady_clock::now() + kFreshStreamWait;
  for (;;) {
    auto read = fetchView(client, cluster, true);
    if (!read) return {refused({}, 503, read.error()), std::nullopt};
    view = std::move(read.value());
    FirstStep f = planFirst(*view, ask);
    if (f.request || !streamNotSeen(*view, ask) || stopped() || std::chrono::steady_clock::now() >= until) return f;
    std::this_thread::sleep_for(kFreshStreamPoll);
  }
}

}  // namespace

SwitchoverDone checkSwitchover(zk::Client& client, const std::string& cluster, const SwitchoverAsk& ask) {
  std::optional<ClusterView> view;
  FirstStep f = planFirstFresh(client, cluster, ask, [] { return false; }, view);
  if (f.request) f.done.status = 200;
  return f.done;
}

SwitchoverDone runSwitchover(zk::Client& client, const std::string& cluster, const SwitchoverOptions& o) {
  auto stopped = [&] { return o.stop && o.stop(); };
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  SwitchoverDone done;
  auto settleUntil = std::chrono::steady_clock::now();
  for (int step = 0; step < kMaxSteps;) {
    const bool first = step == 0;
    // A later step's refusal: the cluster may still be settling from the last one.
    auto retry = [&] {
      if (first || stopped() || std::chrono::steady_clock::now() > settleUntil) return false;
      std::this_thread::sleep_for(kSettlePoll);
      return true;
    };
    std::optional<ClusterView> view;
    std::optional<FirstStep> f;
    if (first) {
      f = planFirstFresh(client, cluster, o.ask, stopped, view);
      if (!f->request) return f->done;
    } else {
      auto read = fetchView(client, cluster, true);
      if (!read) return refused(done, 503, read.error());
      view = std::move(read.value());
    }
    const ClusterState& s = view->state;
    std::optional<nlohmann::json> request;
    if (first) {
      done = f->done;
      request = f->request;
      say("switching over from " + s.primary.id + " to " + done.candidate + " (" + roleInState(s, done.candidate) +
          "): " + std::to_string(done.requests) + " promote request" + (done.requests == 1 ? "" : "s"));
    } else if (s.primary.id == done.candidate) {
      auto writable = waitWritable(s.primary, o.writableTimeout, stopped);
      done.writableAfterSeconds = writable;
      if (!writable) {
        return refused(done, 503, done.candidate + " is the primary but not writable " +
                                      std::to_string(o.writableTimeout.count()) + " s after the last step");
      }
      done.status = 200;
      return done;
    } else {
      const std::string role = roleInState(s, done.candidate);
      if (role != "sync" && role != "async") {
        return refused(done, 503, done.candidate + " is " + (role.empty() ? "no longer in the cluster" : role) +
                                      " after step " + std::to_string(step) + "; the primary is " + s.primary.id);
      }
      PromoteArgs args;
      args.id = done.candidate;
      args.role = role;
      auto built = buildPromoteRequest(*view, args);
      if (!built && retry()) continue;
      if (!built) return refused(done, 503, "not promoting " + done.candidate + ": " + built.error());
      request = *built;
    }
    const std::string what = "switchover to " + done.candidate + " (request " + std::to_string(step + 1) + " of " +
                             std::to_string(done.requests) + "), " + o.by;
    auto written = writePromoteRequest(client, *request, s.generation, what);
    if (!written) {
      return refused(done, first ? 409 : 503, "not promoting " + done.candidate + ": " + written.error());
    }
    say("request " + std::to_string(step + 1) + " of " + std::to_string(done.requests) + ": " + request->dump());
    auto waited = waitForPromote(client, *request, written->state,
                                 "switchover: removing its expired request, " + o.by, stopped);
    done.steps.push_back(
        {{"request", *request}, {"outcome", outcomeName(waited.outcome)}, {"message", waited.message}});
    if (waited.outcome != PromoteOutcome::kCarriedOut) return refused(done, 503, waited.message);
    say("request " + std::to_string(step + 1) + ": " + waited.message);
    ++step;
    settleUntil = std::chrono::steady_clock::now() + o.settleTimeout;
  }
  return refused(done, 503, "gave up after " + std::to_string(kMaxSteps) + " promote requests");
}

}  // namespace dugong::adm
