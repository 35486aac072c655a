#include "statemachine/promote_request.h"

namespace dugong {

Result<PromoteRequest> validatePromote(const nlohmann::json& j, const ClusterState& state, EpochMs now) {
  if (!j.is_object()) return Error{"promote request is not an object"};
  PromoteRequest r;
  auto id = j.find("id");
  if (id == j.end() || !id->is_string()) return Error{"promote request: id must be a string"};
  r.id = id->get<std::string>();
  auto role = j.find("role");
  if (role == j.end() || !role->is_string() || (*role != "sync" && *role != "async")) {
    return Error{"promote request: role must be \"sync\" or \"async\""};
  }
  r.role = role->get<std::string>();
  if (auto idx = j.find("asyncIndex"); idx != j.end()) {
    if (!idx->is_number_integer()) return Error{"promote request: asyncIndex must be an integer"};
    r.asyncIndex = idx->get<int64_t>();
  }
  auto gen = j.find("generation");
  if (gen == j.end() || !gen->is_number_integer()) return Error{"promote request: generation must be an integer"};
  r.generation = gen->get<int64_t>();
  auto exp = j.find("expireTime");
  if (exp == j.end() || !exp->is_string()) return Error{"promote request: expireTime must be a string"};

  auto t = parseTime(exp->get<std::string>());
  if (!t) return Error{"promote request: expireTime: " + t.error()};
  r.expireTime = t.value();

  if (r.generation != state.generation) {
    return Error{"promote request is for generation " + std::to_string(r.generation) + " but the cluster is at " +
                 std::to_string(state.generation)};
  }
  if (now > r.expireTime) return Error{"promote request expired at " + formatIso8601(r.expireTime)};

  if (r.role == "async") {
    if (!r.asyncIndex) return Error{"promote request: an async promotion needs asyncIndex"};
    if (*r.asyncIndex < 0 || *r.asyncIndex >= static_cast<int64_t>(state.async.size())) {
      return Error{"promote request: asyncIndex " + std::to_string(*r.asyncIndex) + " is out of range (" +
                   std::to_string(state.async.size()) + " asyncs)"};
    }
    const auto& at = state.async[static_cast<size_t>(*r.asyncIndex)];
    if (at.id != r.id) {
      return Error{"promote request: async[" + std::to_string(*r.asyncIndex) + "] is \"" + at.id + "\", not \"" +
                   r.id + "\""};
    }
  } else if (state.quorum) {
    if (!containsPeer(state.quorum->members, r.id)) {
      return Error{"promote request: \"" + r.id + "\" is not a member of the synchronous set"};
    }
  } else if (!state.sync || state.sync->id != r.id) {
    return Error{"promote request: \"" + r.id + "\" is not the sync"};
  }
  return r;
}

}  // namespace dugong
