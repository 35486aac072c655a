#include "agent/switchover.h"

#include <spdlog/spdlog.h>

#include "agent/http_api.h"
#include "ops/cluster.h"
#include "ops/switchover_flow.h"

namespace dugong::agent {
namespace {

constexpr auto kZkTimeout = std::chrono::seconds(10);

}  // namespace

bool Switchover::start(const adm::SwitchoverAsk& ask, HttpServer::Respond respond) {
  if (running_.exchange(true)) return false;
  if (worker_.joinable()) worker_.join();  // the previous one, finished
  stopping_ = false;
  worker_ = std::thread([this, ask, respond = std::move(respond)] {
    HttpReply reply = run(ask);
    running_ = false;
    respond(std::move(reply));
  });
  return true;
}

HttpReply Switchover::run(const adm::SwitchoverAsk& ask) {
  auto client = adm::connectZk(zk_, kZkTimeout);
  if (!client) return jsonError(503, client.error());
  const std::string to = ask.candidate.value_or("the sync");
  adm::SwitchoverOptions o;
  o.ask = ask;
  o.by = "POST /switchover, by the agent of " + self_;
  o.stop = [this] { return stopping_.load(); };
  o.progress = [&to](const std::string& line) { spdlog::info("switchover to {}: {}", to, line); };
  adm::SwitchoverDone done = adm::runSwitchover(**client, zk_.cluster, o);
  if (done.status != 200) {
    spdlog::warn("switchover to {}: {}", to, done.error);
    nlohmann::json j = {{"error", done.error}, {"steps", done.steps}};
    return {done.status, "application/json", j.dump() + "\n"};
  }
  spdlog::info("switchover to {}: done, it is the writable primary", done.candidate);
  return {200, "application/json",
          nlohmann::json({{"primary", done.candidate}, {"writable", true}, {"steps", done.steps}}).dump() + "\n"};
}

}  // namespace dugong::agent
