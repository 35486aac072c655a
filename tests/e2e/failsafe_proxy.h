// An attacker on the path between a primary's agent and its sync's HTTP port, for the
// failsafe's messages (POST /failsafe, agent/failsafe_message.h): an HTTP relay that
// passes each request to the sync and its answer back, honestly or changed as the test
// says. One request per connection (as the agents' client sends them); each exchange
// bounded by a timeout. Other requests than POST /failsafe pass unchanged.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace dugong::e2e {

enum class FailsafeForgery {
  kNone,                // honest: requests and answers as they are
  kFlipGranted,         // the sync's answer's "granted" turned over (a refusal made a grant)
  kRequestDuration,     // the request's durationMs changed (the sync would promise less than
                        // the primary times)
  kRequestGeneration,   // the request's generation changed
  kReplay,              // the request reaches the sync, and the last genuine grant relayed
                        // earlier is given back instead of its answer
  kForgedGrant,         // nothing reaches the sync: a grant made up from the request's own
                        // nonce and MAC
};
const char* forgeryName(FailsafeForgery f);

class FailsafeProxy {
 public:
  // Accepts on `listenFd` (listening; the proxy owns it) and connects to the sync with
  // `connectUpstream` (a connected socket, or -1).
  FailsafeProxy(int listenFd, std::function<int()> connectUpstream);
  ~FailsafeProxy();
  FailsafeProxy(const FailsafeProxy&) = delete;
  FailsafeProxy& operator=(const FailsafeProxy&) = delete;

  // From the next request on; the counters start again.
  void forge(FailsafeForgery f);
  // Failsafe requests seen, and answers granting sent back to the primary, since forge().
  int requests() const { return requests_; }
  int grantsSent() const { return grantsSent_; }
  // Whether a genuine grant was relayed yet (what kReplay replays).
  bool holdsAGrant() const;

 private:
  void run();
  void serve(int client);
  // The answer (status and body) sent back for one failsafe request `body`.
  std::pair<int, std::string> exchange(const std::string& target, const std::string& body);

  int listenFd_;
  std::function<int()> connectUpstream_;
  std::atomic<FailsafeForgery> forgery_{FailsafeForgery::kNone};
  std::atomic<int> requests_{0}, grantsSent_{0};
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::string recordedGrant_;  // the body of the last genuine grant relayed
  std::thread thread_;
};

}  // namespace dugong::e2e
