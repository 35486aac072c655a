#include "pg/managed_conf.h"

#include <sstream>

namespace dugong::pg {
namespace {
const char kStatePrefix[] = "# dugong-state: ";

// What commits wait for: nothing but on a primary; any k of a quorum's members; the sync
// (and the sync it had, after a fence for a new one).
std::string synchronousStandbyNames(const ManagedState& state) {
  if (state.role != "primary") return "";
  if (state.quorum) return renderQuorum(*state.quorum);
  if (!state.syncId) return "";
  if (state.alsoSyncId) {
    return "FIRST 2 (" + quoteStandbyName(*state.syncId) + ", " + quoteStandbyName(*state.alsoSyncId) + ")";
  }
  return quoteStandbyName(*state.syncId);
}
}  // namespace

std::string confQuote(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') out += "''";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out + "'";
}

nlohmann::json ManagedState::toJson() const {
  nlohmann::json j = {{"role", role}, {"readOnly", readOnly}};
  j["upstream"] = upstreamId ? nlohmann::json(*upstreamId) : nlohmann::json(nullptr);
  j["sync"] = syncId ? nlohmann::json(*syncId) : nlohmann::json(nullptr);
  if (alsoSyncId) j["alsoSync"] = *alsoSyncId;
  if (quorum) {
    j["quorumK"] = quorum->k;
    j["quorumMembers"] = quorum->members;
  }
  if (source) j["source"] = *source;
  if (sourceCluster) j["sourceCluster"] = *sourceCluster;
  if (sourcePeerId) j["sourcePeer"] = *sourcePeerId;
  if (sourcePeerUrl) j["sourcePeerUrl"] = *sourcePeerUrl;
  if (slotName) j["slot"] = *slotName;
  if (upstreamUrl) j["upstreamUrl"] = *upstreamUrl;
  if (wasPrimary) j["wasPrimary"] = true;
  if (writesStopped) j["writesStopped"] = true;
  if (replayUnhindered) j["replayUnhindered"] = true;
  return j;
}

std::map<std::string, std::string> defaultSettings(const PgOptions& options) {
  // wal_keep_size 0: slots keep what each standby needs, and a promoted sync keeps what
  // its deposed primary needs to rejoin (docs/design.md "WAL retention for a deposed
  // primary"); PostgreSQL 15's pg_rewind copies whatever the source keeps beyond that.
  std::map<std::string, std::string> defaults = {
      {"max_wal_senders", "10"},      {"max_replication_slots", "10"}, {"wal_keep_size", "0"},
      {"hot_standby_feedback", "on"}, {"wal_sender_timeout", "'10s'"},  {"wal_receiver_timeout", "'10s'"},
      // A standby whose upstream restarted (a crashed primary restarted by its agent)
      // connects again at most this long after it accepts connections; commits wait
      // for the sync meanwhile. Each failed attempt logs one line on the standby.
      {"wal_retrieve_retry_interval", "'200ms'"},
      // Crash recovery first makes the whole data directory durable: one syncfs() per
      // file system instead of opening and fsyncing every file.
      {"recovery_init_sync_method", "syncfs"}, {"wal_level", "replica"}};
  // Logical decoding: each logical slot and each consumer's walsender comes on top of
  // the standbys' (docs/design.md "Logical replication").
  if (auto w = options.settings.find("wal_level"); w != options.settings.end() && w->second == "logical") {
    defaults["max_wal_senders"] = "20";
    defaults["max_replication_slots"] = "20";
  }
  return defaults;
}

std::string renderManagedConf(const PgOptions& options, const ManagedState& state) {
  std::ostringstream out;
  out << "# Managed by dugong: rewritten at every role change. Do not edit; use postgres.settings in dugong.yaml or\n"
         "# the cluster configuration (dugong-adm config) instead.\n";
  nlohmann::json recorded = state.toJson();
  out << kStatePrefix << recorded.dump() << "\n";
  std::map<std::string, std::string> defaults = defaultSettings(options);
  for (const auto& [k, v] : options.settings) defaults.erase(k);
  for (const auto& [k, v] : defaults) out << k << " = " << v << "\n";
  for (const auto& [k, v] : options.settings) out << k << " = " << confQuote(v) << "\n";
  // Managed: always last, so that nothing above overrides them.
  out << "listen_addresses = " << confQuote(options.listenAddress) << "\n";
  out << "port = " << options.port << "\n";
  out << "unix_socket_directories = " << confQuote(options.socketPath()) << "\n";
  out << "unix_socket_permissions = 0700\n";
  out << "wal_log_hints = on\n";
  out << "hot_standby = on\n";
  out << "recovery_target_timeline = 'latest'\n";
  out << "synchronous_commit = on\n";
  out << "synchronous_standby_names = " << confQuote(synchronousStandbyNames(state)) << "\n";
  out << "default_transaction_read_only = " << (state.readOnlyInEffect() ? "on" : "off") << "\n";
  const bool standby = state.streams();
  out << "primary_conninfo = " << confQuote(standby ? state.primaryConninfo : "") << "\n";
  out << "primary_slot_name = " << confQuote(standby && state.slotName ? *state.slotName : "") << "\n";
  out << "max_slot_wal_keep_size = " << confQuote(options.maxSlotWalKeepSize) << "\n";
  if (state.role == "standby-leader" && !state.restoreCommand.empty()) {
    // Managed, never from the settings (the cluster configuration's guard refuses it).
    out << "restore_command = " << confQuote(state.replayUnhindered ? "" : state.restoreCommand) << "\n";
    // A leader restoring only (no stream) asks the repository once a second, not at the
    // 200 ms a stream's reconnection is retried at.
    if (state.primaryConninfo.empty()) out << "wal_retrieve_retry_interval = '1s'\n";
  }
  if (standby && state.replayUnhindered) {
    out << "recovery_min_apply_delay = 0\n";
    out << "max_standby_streaming_delay = 0\n";
    out << "max_standby_archive_delay = 0\n";
  }
  for (const auto& [name, value] : serverTlsSettings(options.tls)) out << name << " = " << confQuote(value) << "\n";
  return out.str();
}

void recordLeaderSource(ManagedState& state, const SourceEndpoint& source) {
  if (source.kind != SourceKind::kDugong) return;
  state.sourceCluster = source.cluster;
  if (source.peer) {
    state.sourcePeerId = source.peer->id;
    state.sourcePeerUrl = source.peer->pgUrl;
  }
}

std::optional<SourceEndpoint> leaderSourceFollowed(const ManagedState& state) {
  if (state.role != "standby-leader" || !state.sourceCluster) return std::nullopt;
  SourceEndpoint e;
  e.kind = SourceKind::kDugong;
  e.cluster = *state.sourceCluster;
  if (state.sourcePeerId && state.sourcePeerUrl) {
    PeerIdentity p;
    p.id = *state.sourcePeerId;
    p.pgUrl = *state.sourcePeerUrl;
    e.peer = p;
  }
  return e;
}

Result<ManagedState> parseManagedConf(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kStatePrefix, 0) != 0) continue;
    auto j = nlohmann::json::parse(line.substr(sizeof kStatePrefix - 1), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Error{"dugong.conf: unreadable state line"};
    ManagedState s;
    try {
      s.role = j.at("role").get<std::string>();
      s.readOnly = j.at("readOnly").get<bool>();
      if (j.contains("upstream") && j["upstream"].is_string()) s.upstreamId = j["upstream"].get<std::string>();
      if (j.contains("sync") && j["sync"].is_string()) s.syncId = j["sync"].get<std::string>();
      if (j.contains("alsoSync") && j["alsoSync"].is_string()) s.alsoSyncId = j["alsoSync"].get<std::string>();
      if (j.contains("quorumK") || j.contains("quorumMembers")) {
        s.quorum = StandbyQuorum{j.at("quorumK").get<int>(), j.at("quorumMembers").get<std::vector<std::string>>()};
        if (auto valid = validQuorum(*s.quorum); !valid) return Error{"dugong.conf: bad quorum: " + valid.error()};
      }
      if (j.contains("source") && j["source"].is_string()) s.source = j["source"].get<std::string>();
      for (auto [key, field] : {std::pair{"sourceCluster", &s.sourceCluster}, std::pair{"sourcePeer", &s.sourcePeerId},
                                std::pair{"sourcePeerUrl", &s.sourcePeerUrl}}) {
        if (j.contains(key) && j[key].is_string()) *field = j[key].get<std::string>();
      }
      if (j.contains("slot") && j["slot"].is_string()) s.slotName = j["slot"].get<std::string>();
      if (j.contains("upstreamUrl") && j["upstreamUrl"].is_string()) {
        s.upstreamUrl = j["upstreamUrl"].get<std::string>();
      }
      if (j.contains("wasPrimary")) s.wasPrimary = j["wasPrimary"].get<bool>();
      if (j.contains("writesStopped")) s.writesStopped = j["writesStopped"].get<bool>();
      if (j.contains("replayUnhindered")) s.replayUnhindered = j["replayUnhindered"].get<bool>();
    } catch (const nlohmann::json::exception& e) {
      return Error{std::string("dugong.conf: bad state line: ") + e.what()};
    }
    if (s.role != "none" && s.role != "primary" && !s.streams()) {
      return Error{"dugong.conf: unknown role '" + s.role + "'"};
    }
    return s;
  }
  return Error{"dugong.conf: no state line"};
}

}  // namespace dugong::pg
