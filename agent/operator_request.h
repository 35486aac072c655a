// An operator's request to one agent, at <root>/requests/<peer id> (zk/layout.h):
// restart or reload its postgres. dugong-adm writes it and deletes it once the agent
// has answered (in its /state, "request"); an agent carries out each request id once,
// and never one past its expiry (a node left behind by an interrupted dugong-adm).
// Pure: no I/O.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "statemachine/result.h"
#include "statemachine/time_format.h"

namespace dugong::agent {

struct OperatorRequest {
  std::string id;      // unique per request (dugong-adm: time, host and pid)
  std::string action;  // "restart" or "reload"
  EpochMs expireTime = 0;
  std::string by;      // who asked, for the log

  std::string serialize() const;
  static Result<OperatorRequest> parse(std::string_view bytes);
};

// What an agent reports in /state about the last request it saw.
struct RequestStatus {
  std::string id;
  std::string action;
  std::string state;  // "running", "done", "failed", "refused"
  std::string detail;
  nlohmann::json toJson() const;
};

}  // namespace dugong::agent
