#include "zk/client.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "zk/c_client.h"

namespace dugong::zk {

using detail::describeRc;

namespace {

EpochMs clientNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// The handle plus the connection state its watcher reports.
struct Client::Handle {
  zhandle_t* zh = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  int state = 0;

  ~Handle() {
    if (zh != nullptr) zookeeper_close(zh);
  }

  static void watcher(zhandle_t* /*zh*/, int type, int state, const char* /*path*/, void* ctx) {
    if (type != ZOO_SESSION_EVENT || ctx == nullptr) return;
    auto* h = static_cast<Handle*>(ctx);
    std::lock_guard<std::mutex> lock(h->mu);
    h->state = state;
    h->cv.notify_all();
  }

  // Waits until connected or a terminal state; returns the state.
  int waitConnected(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, timeout, [&] {
      return state == ZOO_CONNECTED_STATE || state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE;
    });
    return state;
  }

  static Result<std::unique_ptr<Handle>> open(const std::string& hosts, int timeoutMs, const clientid_t* id,
                                              const std::optional<DigestAuth>& auth,
                                              std::chrono::milliseconds wait) {
    detail::installClientLogging();
    auto h = std::make_unique<Handle>();
    h->zh = zookeeper_init2(hosts.c_str(), watcher, timeoutMs, id, h.get(), ZOO_NO_LOG_CLIENTENV,
                            detail::clientLogLine);
    if (h->zh == nullptr) return Error{"zookeeper: cannot create a handle for \"" + hosts + "\": " + std::strerror(errno)};
    if (auth) {
      std::string creds = auth->credentials();
      int rc = zoo_add_auth(h->zh, "digest", creds.data(), static_cast<int>(creds.size()), nullptr, nullptr);
      if (rc != ZOK) return Error{"zookeeper: digest authentication: " + describeRc(rc)};
    }
    int state = h->waitConnected(wait);
    if (state == ZOO_EXPIRED_SESSION_STATE) return Error{"zookeeper: the session expired"};
    if (state == ZOO_AUTH_FAILED_STATE) return Error{"zookeeper: authentication failed"};
    if (state != ZOO_CONNECTED_STATE) {
      return Error{"zookeeper: could not connect to " + hosts + " within " + std::to_string(wait.count()) + " ms"};
    }
    return h;
  }
};

Result<std::unique_ptr<Client>> Client::connect(const ZkOptions& options, std::chrono::milliseconds timeout) {
  if (auto valid = options.validate(); !valid) return Error{valid.error()};
  auto handle = Handle::open(options.hosts(), options.sessionTimeoutMs, nullptr, options.auth, timeout);
  if (!handle) return Error{handle.error()};
  return std::unique_ptr<Client>(new Client(options, std::move(handle).value(), timeout));
}

Client::Client(ZkOptions options, std::unique_ptr<Handle> handle, std::chrono::milliseconds timeout)
    : options_(std::move(options)), layout_(options_.effectiveRoot()), handle_(std::move(handle)), timeout_(timeout) {}

Client::~Client() = default;

int64_t Client::sessionId() const {
  const clientid_t* id = zoo_client_id(handle_->zh);
  return id != nullptr ? id->client_id : 0;
}

Result<bool> Client::requireConnected() const {
  if (zoo_state(handle_->zh) == ZOO_CONNECTED_STATE) return true;
  // A reconnection may be under way: give it the call's time bound.
  int state = handle_->waitConnected(timeout_);
  if (state == ZOO_CONNECTED_STATE) return true;
  return Error{"zookeeper: not connected (connection lost or session expired)"};
}

Result<StateNode> Client::readState() { return read(layout_.state()); }
Result<StateNode> Client::readConfig() { return read(layout_.config()); }
Result<StateNode> Client::readNode(const std::string& path) { return read(path); }

Result<StateNode> Client::read(const std::string& path) {
  if (auto c = requireConnected(); !c) return Error{c.error()};
  std::vector<char> buf(1 << 20);
  int len = static_cast<int>(buf.size());
  Stat stat{};
  int rc = zoo_get(handle_->zh, path.c_str(), 0, buf.data(), &len, &stat);
  if (rc == ZNONODE) return StateNode{};
  if (rc != ZOK) return Error{"zookeeper: reading " + path + ": " + describeRc(rc)};
  return StateNode{true, std::string(buf.data(), static_cast<size_t>(std::max(len, 0))), stat.version};
}

Result<int32_t> Client::setNode(const std::string& path, std::string_view bytes, int32_t expectedVersion) {
  if (auto made = ensureLayout(); !made) return Error{made.error()};
  const int len = static_cast<int>(bytes.size());
  if (expectedVersion < 0) {
    int rc = zoo_create(handle_->zh, path.c_str(), bytes.data(), len, detail::aclFor(options_), ZOO_PERSISTENT,
                        nullptr, 0);
    if (rc == ZOK) return 0;
    if (rc != ZNODEEXISTS || expectedVersion == -1) return Error{"zookeeper: creating " + path + ": " + describeRc(rc)};
  }
  Stat stat{};
  int rc = zoo_set2(handle_->zh, path.c_str(), bytes.data(), len, expectedVersion < 0 ? -1 : expectedVersion, &stat);
  if (rc != ZOK) return Error{"zookeeper: writing " + path + ": " + describeRc(rc)};
  return stat.version;
}

Result<bool> Client::deleteNode(const std::string& path) {
  if (auto c = requireConnected(); !c) return Error{c.error()};
  int rc = zoo_delete(handle_->zh, path.c_str(), -1);
  if (rc != ZOK && rc != ZNONODE) return Error{"zookeeper: deleting " + path + ": " + describeRc(rc)};
  return true;
}

Result<bool> Client::deleteState(int32_t expectedVersion) {
  if (auto c = requireConnected(); !c) return Error{c.error()};
  int rc = zoo_delete(handle_->zh, layout_.state().c_str(), expectedVersion);
  if (rc != ZOK) return Error{"zookeeper: deleting " + layout_.state() + ": " + describeRc(rc)};
  return true;
}

Result<std::vector<ElectionEntry>> Client::electionNodes() {
  if (auto c = requireConnected(); !c) return Error{c.error()};
  String_vector children{};
  int rc = zoo_get_children(handle_->zh, layout_.election().c_str(), 0, &children);
  if (rc == ZNONODE) return std::vector<ElectionEntry>{};
  if (rc != ZOK) return Error{"zookeeper: listing " + layout_.election() + ": " + describeRc(rc)};
  std::vector<std::string> names;
  for (int32_t i = 0; i < children.count; ++i) names.emplace_back(children.data[i]);
  deallocate_String_vector(&children);
  std::vector<ElectionEntry> out;
  for (const auto& name : sortElectionNodes(std::move(names))) {
    std::vector<char> buf(64 * 1024);
    int len = static_cast<int>(buf.size());
    Stat stat{};
    std::string path = layout_.election() + "/" + name;
    rc = zoo_get(handle_->zh, path.c_str(), 0, buf.data(), &len, &stat);
    if (rc == ZNONODE) continue;
    if (rc != ZOK) return Error{"zookeeper: reading " + path + ": " + describeRc(rc)};
    ElectionEntry e;
    e.node = name;
    e.sequence = sequenceOf(name).value_or(0);
    e.ephemeralOwner = stat.ephemeralOwner;
    e.data.assign(buf.data(), static_cast<size_t>(std::max(len, 0)));
    auto parsed = nlohmann::json::parse(e.data, nullptr, false);
    if (!parsed.is_discarded()) {
      if (auto id = PeerIdentity::fromJson(parsed, name)) e.identity = id.value();
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<PeerList> Client::activePeers() {
  auto nodes = electionNodes();
  if (!nodes) return Error{nodes.error()};
  PeerList peers;
  for (const auto& e : nodes.value()) {
    if (e.identity) peers.push_back(*e.identity);
  }
  return dedupeById(peers);
}

Result<std::vector<HistoryEntry>> Client::history() { return records(layout_.history()); }
Result<std::vector<HistoryEntry>> Client::configHistory() { return records(layout_.configHistory()); }

Result<std::vector<HistoryEntry>> Client::records(const std::string& dir) {
  if (auto c = requireConnected(); !c) return Error{c.error()};
  String_vector children{};
  int rc = zoo_get_children(handle_->zh, dir.c_str(), 0, &children);
  if (rc == ZNONODE) return std::vector<HistoryEntry>{};
  if (rc != ZOK) return Error{"zookeeper: listing " + dir + ": " + describeRc(rc)};
  std::vector<std::string> names;
  for (int32_t i = 0; i < children.count; ++i) names.emplace_back(children.data[i]);
  deallocate_String_vector(&children);
  std::vector<HistoryEntry> out;
  for (const auto& name : sortHistoryNodes(std::move(names))) {
    std::vector<char> buf(1 << 20);
    int len = static_cast<int>(buf.size());
    std::string path = dir + "/" + name;
    rc = zoo_get(handle_->zh, path.c_str(), 0, buf.data(), &len, nullptr);
    if (rc == ZNONODE) continue;
    if (rc != ZOK) return Error{"zookeeper: reading " + path + ": " + describeRc(rc)};
    out.push_back(HistoryEntry{name, sequenceOf(name, true).value_or(0),
                               std::string(buf.data(), static_cast<size_t>(std::max(len, 0)))});
  }
  return out;
}

Result<bool> Client::ensureLayout() {
  if (auto c = requireConnected(); !c) return c;
  for (const auto& path : layout_.persistentNodes()) {
    int rc = zoo_create(handle_->zh, path.c_str(), "", 0, detail::aclFor(options_), ZOO_PERSISTENT, nullptr, 0);
    if (rc != ZOK && rc != ZNODEEXISTS) return Error{"zookeeper: creating " + path + ": " + describeRc(rc)};
  }
  return true;
}

StateWriteFinished Client::putState(const ClusterState& state, int32_t expectedVersion, const std::string& reason) {
  return putStateBytes(state.serialize(), expectedVersion, reason);
}

StateWriteFinished Client::putStateBytes(std::string_view bytes, int32_t expectedVersion, const std::string& reason) {
  return putWithHistory(layout_.state(), layout_.historyPrefix(), bytes, expectedVersion, reason);
}

StateWriteFinished Client::putConfigBytes(std::string_view bytes, int32_t expectedVersion, const std::string& reason) {
  return putWithHistory(layout_.config(), layout_.configHistoryPrefix(), bytes, expectedVersion, reason);
}

// One multi-op: the node at `expectedVersion` (-1: created) and its history record.
StateWriteFinished Client::putWithHistory(const std::string& statePath, const std::string& historyPrefix,
                                          std::string_view bytes, int32_t expectedVersion, const std::string& reason) {
  StateWriteFinished out;
  if (expectedVersion < -1) {
    out.error = "invalid expected version " + std::to_string(expectedVersion);
    return out;
  }
  if (expectedVersion == -1) {
    if (auto made = ensureLayout(); !made) {
      out.error = made.error();
      return out;
    }
  } else if (auto c = requireConnected(); !c) {
    out.error = c.error();
    return out;
  }
  std::string record = historyRecord(clientNowMs(), bytes, reason);
  std::vector<char> pathBuf(512);
  Stat stat{};
  zoo_op_t ops[2];
  zoo_op_result_t results[2];
  const ACL_vector* acl = detail::aclFor(options_);
  if (expectedVersion == -1) {
    zoo_create_op_init(&ops[0], statePath.c_str(), bytes.data(), static_cast<int>(bytes.size()), acl, ZOO_PERSISTENT,
                       nullptr, 0);
  } else {
    zoo_set_op_init(&ops[0], statePath.c_str(), bytes.data(), static_cast<int>(bytes.size()), expectedVersion, &stat);
  }
  zoo_create_op_init(&ops[1], historyPrefix.c_str(), record.data(), static_cast<int>(record.size()), acl,
                     ZOO_PERSISTENT_SEQUENTIAL, pathBuf.data(), static_cast<int>(pathBuf.size()));
  int rc = zoo_multi(handle_->zh, 2, ops, results);
  if (rc == ZOK) {
    out.ok = true;
    out.newVersion = expectedVersion == -1 ? 0 : stat.version;
    return out;
  }
  int first = results[0].err;
  if (first == ZBADVERSION || first == ZNODEEXISTS || first == ZNONODE) {
    out.lostRace = true;
    out.error = first == ZBADVERSION   ? "lost the race: the state is no longer at version " + std::to_string(expectedVersion)
                : first == ZNODEEXISTS ? std::string("lost the race: the state already exists")
                                       : std::string("lost the race: the state does not exist");
    return out;
  }
  if (!detail::outcomeUnknown(rc)) {
    out.error = "zookeeper: writing " + statePath + ": " + describeRc(rc);
    return out;
  }
  // The outcome was lost with the connection: read the node again once reconnected.
  auto current = read(statePath);
  if (!current) {
    out.error = "outcome unknown: " + describeRc(rc) + ", and the state could not be re-read: " + current.error();
    return out;
  }
  if (current->exists && current->data == bytes) {
    out.ok = true;
    out.newVersion = current->version;
    return out;
  }
  bool unchanged = expectedVersion == -1 ? !current->exists : current->version == expectedVersion;
  out.lostRace = !unchanged;
  out.error = unchanged ? "the write was not applied (connection lost)"
                        : "lost the race: another writer changed the state while the connection was lost";
  return out;
}

Result<std::chrono::steady_clock::time_point> closeSessionFromOutside(const std::string& connectString,
                                                                      int64_t sessionId, const std::string& password,
                                                                      std::chrono::milliseconds timeout) {
  clientid_t id{};
  id.client_id = sessionId;
  std::memcpy(id.passwd, password.data(), std::min(password.size(), sizeof id.passwd));
  std::optional<std::chrono::steady_clock::time_point> closedAt;
  for (int attempt = 0; attempt < 20; ++attempt) {
    detail::installClientLogging();
    auto h = std::make_unique<Client::Handle>();
    h->zh = zookeeper_init2(connectString.c_str(), Client::Handle::watcher, 30000, &id, h.get(), ZOO_NO_LOG_CLIENTENV,
                            detail::clientLogLine);
    if (h->zh == nullptr) return Error{"zookeeper: cannot create a handle: " + std::string(std::strerror(errno))};
    int state = h->waitConnected(timeout);
    if (state == ZOO_EXPIRED_SESSION_STATE) {
      if (closedAt) return *closedAt;
      return Error{"zookeeper: session " + detail::sessionIdText(sessionId) + " had already expired"};
    }
    if (state != ZOO_CONNECTED_STATE) return Error{"zookeeper: could not take the session over"};
    const clientid_t* got = zoo_client_id(h->zh);
    if (got == nullptr || got->client_id != sessionId) return Error{"zookeeper: did not get the same session back"};
    int rc = zookeeper_close(h->zh);
    h->zh = nullptr;
    if (rc != ZOK) return Error{"zookeeper: closing the session: " + describeRc(rc)};
    closedAt = std::chrono::steady_clock::now();
  }
  return Error{"zookeeper: the session's own client kept winning it back"};
}

}  // namespace dugong::zk
