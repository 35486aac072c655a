#include "zk/layout.h"

#include <algorithm>
#include <set>

namespace dugong::zk {

std::vector<std::string> Layout::persistentNodes() const {
  std::vector<std::string> nodes;
  for (size_t pos = root_.find('/', 1); pos != std::string::npos; pos = root_.find('/', pos + 1)) {
    nodes.push_back(root_.substr(0, pos));
  }
  nodes.push_back(root_);
  nodes.push_back(election());
  nodes.push_back(history());
  nodes.push_back(configHistory());
  nodes.push_back(requests());
  return nodes;
}

namespace {

bool allDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<int64_t> parseDigits(std::string_view s) {
  if (!allDigits(s) || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

std::vector<std::string> sortBySequence(std::vector<std::string> names, bool bare) {
  std::vector<std::pair<int64_t, std::string>> keyed;
  for (auto& n : names) {
    if (bare ? !allDigits(n) : !peerIdOf(n)) continue;
    if (auto seq = sequenceOf(n, bare)) keyed.emplace_back(*seq, std::move(n));
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> out;
  out.reserve(keyed.size());
  for (auto& [seq, n] : keyed) out.push_back(std::move(n));
  return out;
}

}  // namespace

std::optional<int64_t> sequenceOf(std::string_view name, bool allowBare) {
  if (allowBare && allDigits(name)) return parseDigits(name);
  size_t dash = name.rfind('-');
  if (dash == std::string_view::npos) return std::nullopt;
  return parseDigits(name.substr(dash + 1));
}

std::optional<std::string> peerIdOf(std::string_view electionNodeName) {
  size_t dash = electionNodeName.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  if (!allDigits(electionNodeName.substr(dash + 1))) return std::nullopt;
  return std::string(electionNodeName.substr(0, dash));
}

std::vector<std::string> sortElectionNodes(std::vector<std::string> names) {
  return sortBySequence(std::move(names), false);
}

std::vector<std::string> sortHistoryNodes(std::vector<std::string> names) {
  return sortBySequence(std::move(names), true);
}

PeerList dedupeById(const PeerList& peers) {
  PeerList out;
  std::set<std::string> seen;
  for (const auto& p : peers) {
    if (seen.insert(p.id).second) out.push_back(p);
  }
  return out;
}

std::string historyRecord(EpochMs now, std::string_view stateBytes, const std::string& reason) {
  nlohmann::json record;
  record["time"] = formatIso8601(now);
  auto parsed = nlohmann::json::parse(stateBytes, nullptr, /*allow_exceptions=*/false);
  record["state"] = parsed.is_discarded() ? nlohmann::json(std::string(stateBytes)) : parsed;
  if (!reason.empty()) record["reason"] = reason;
  return record.dump();
}

}  // namespace dugong::zk
