#include "tests/e2e/partition_scenario.h"

#include <libpq-fe.h>
#include <poll.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "pg/sql.h"

namespace dugong::e2e {
namespace {

using Clock = std::chrono::steady_clock;

// One statement on `conn`, abandoned after 5 s (a commit waiting for a sync that is
// gone ignores statement_timeout): the first column of the first row when it returned
// one, "" for a command, nullopt on error or timeout (the connection is then unusable).
std::optional<std::string> exec(PGconn* conn, const std::string& sql) {
  if (!PQsendQuery(conn, sql.c_str())) return std::nullopt;
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (PQisBusy(conn)) {
    if (Clock::now() >= until) return std::nullopt;
    pollfd p{PQsocket(conn), POLLIN, 0};
    ::poll(&p, 1, 100);
    if (!PQconsumeInput(conn)) return std::nullopt;
  }
  std::optional<std::string> out;
  bool ok = true;
  while (PGresult* r = PQgetResult(conn)) {
    const auto st = PQresultStatus(r);
    if (st == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
    else if (st == PGRES_COMMAND_OK) out = out.value_or("");
    else if (st != PGRES_TUPLES_OK) ok = false;
    PQclear(r);
  }
  return ok ? out : std::nullopt;
}

// The port of the first server of a ZooKeeper connect string ("host:port,...[/chroot]").
int firstPort(const std::string& connect) {
  auto first = connect.substr(0, connect.find_first_of(",/"));
  return std::stoi(first.substr(first.rfind(':') + 1));
}

}  // namespace

PartitionCluster::PartitionCluster(int sessionTimeoutMs, PartitionKind kind, std::string zkConfig) : kind_(kind) {
  HarnessOptions o;
  o.peers = 3;
  o.sessionTimeoutMs = sessionTimeoutMs;
  o.zkConfig = std::move(zkConfig);
  if (kind == PartitionKind::kFollowerCutOff) {
    o.zookeeper.servers = 3;
    o.zookeeper.syncLimit = 20;
    o.zookeeper.cuttableQuorumLinks = true;
    // Peer 0 (the first primary) on server 0 only, the others on servers 1 and 2.
    o.agentZkConnect = [](int index, const std::string& connect) {
      const size_t comma = connect.find(',');
      return index == 0 ? connect.substr(0, comma) : connect.substr(comma + 1);
    };
  } else {
    o.agentZkConnect = [this](int, const std::string& connect) {
      proxies_.push_back(std::make_unique<dugong::testing::TcpProxy>("127.0.0.1", firstPort(connect)));
      return "127.0.0.1:" + std::to_string(proxies_.back()->port());
    };
  }
  h_ = std::make_unique<Harness>(o);
}

PartitionOutcome PartitionCluster::run(std::chrono::milliseconds deadline) {
  PartitionOutcome out;
  Harness& h = *h_;
  if (kind_ == PartitionKind::kFollowerCutOff) {
    // Server 0 must be a follower: restarted while no agent runs, it joins the leader the
    // other two elect meanwhile. Peer 0 joins first: the first in session order sets an
    // empty cluster up, as its primary.
    if (h.zookeeper().mode(0) == "leader") h.zookeeper().restart(0);
    h.startAgent(0);
    if (!h.waitFor([&] { return h.status(0).has_value(); }, std::chrono::seconds(60))) {
      out.error = "peer 0's agent did not answer";
      return out;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    h.startAgent(1);
    h.startAgent(2);
  } else {
    h.startAll();
  }
  out.oldPrimary = h.waitForHealthyCluster(2, std::chrono::seconds(180));
  if (out.oldPrimary < 0) {
    out.error = "no healthy cluster";
    return out;
  }
  const int old = out.oldPrimary;
  if (auto r = h.sql(old, "CREATE TABLE part (id int PRIMARY KEY, client text)"); !r) {
    out.error = "create table: " + r.error();
    return out;
  }
  const std::string password = h.peer(0).pg->options.superuserPassword.value_or("");
  const std::string careful = h.multiHostConninfo() + " options='-c statement_timeout=3000'";
  const std::string local = pg::buildConninfo({{"host", "127.0.0.1"},
                                               {"port", std::to_string(h.peer(old).pg->port)},
                                               {"user", "postgres"},
                                               {"dbname", "postgres"},
                                               {"connect_timeout", "2"},
                                               {"password", password}}) +
                            " options='-c statement_timeout=3000'";
  const int oldPort = h.peer(old).pg->port;

  std::mutex mu;
  std::atomic<bool> done{false};
  std::optional<Clock::time_point> cutAt, newPrimaryAt;
  // Careful: a fresh connection per row through the read-write multi-host string.
  std::thread carefulThread([&] {
    for (int id = 1; !done; ++id) {
      PGconn* c = PQconnectdb(careful.c_str());
      if (PQstatus(c) == CONNECTION_OK) {
        auto port = exec(c, "INSERT INTO part VALUES (" + std::to_string(id) +
                                ", 'careful') RETURNING current_setting('port')");
        if (port) {
          std::lock_guard lock(mu);
          out.carefulAcked.insert(id);
          if (cutAt && !newPrimaryAt && std::stoi(*port) != oldPort) newPrimaryAt = Clock::now();
        }
      }
      PQfinish(c);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  // Local: synchronous_commit = local on the old primary's host only.
  std::thread localThread([&] {
    PGconn* c = nullptr;
    for (int id = 1000000; !done; ++id) {
      if (!c || PQstatus(c) != CONNECTION_OK) {
        if (c) PQfinish(c);
        c = PQconnectdb(local.c_str());
        if (PQstatus(c) != CONNECTION_OK || !exec(c, "SET synchronous_commit = local")) {
          PQfinish(c);
          c = nullptr;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          continue;
        }
      }
      if (exec(c, "INSERT INTO part VALUES (" + std::to_string(id) + ", 'local')")) {
        std::lock_guard lock(mu);
        out.localAcked.insert(id);
      } else {
        PQfinish(c);  // a failed or abandoned statement: start over on a new connection
        c = nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (c) PQfinish(c);
  });

  // Hostile: as local, but each row says BEGIN READ WRITE.
  std::thread hostileThread([&] {
    PGconn* c = nullptr;
    for (int id = 2000000; !done; ++id) {
      if (!c || PQstatus(c) != CONNECTION_OK) {
        if (c) PQfinish(c);
        c = PQconnectdb(local.c_str());
        if (PQstatus(c) != CONNECTION_OK) {
          PQfinish(c);
          c = nullptr;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          continue;
        }
      }
      if (exec(c, "BEGIN READ WRITE; SET LOCAL synchronous_commit = local; INSERT INTO part VALUES (" +
                      std::to_string(id) + ", 'hostile'); COMMIT")) {
        std::lock_guard lock(mu);
        out.hostileAcked.insert(id);
      } else {
        PQfinish(c);
        c = nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (c) PQfinish(c);
  });

  std::this_thread::sleep_for(std::chrono::seconds(2));  // the clients write normally first
  {
    std::lock_guard lock(mu);
    cutAt = Clock::now();
    out.cutWallMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  }
  if (kind_ == PartitionKind::kFollowerCutOff) {
    if (old != 0 || h.zookeeper().mode(0) != "follower") {
      done = true;
      carefulThread.join();
      localThread.join();
      hostileThread.join();
      out.error = "the primary is peer " + std::to_string(old) + " and ZooKeeper server 0 is a " +
                  h.zookeeper().mode(0) + ": want peer 0 on a follower";
      return out;
    }
    h.zookeeper().cutQuorumLinks(0);
  } else {
    proxies_.at(static_cast<size_t>(old))->cut();
  }
  const auto until = Clock::now() + deadline;
  bool sawNotWritable = false;
  while (Clock::now() < until) {
    int writable = 0;
    for (int i = 0; i < h.size(); ++i) writable += h.httpStatus(i, "/primary") == 200 ? 1 : 0;
    if (writable > 1) out.twoWritablePrimaries = true;
    if (!sawNotWritable && h.httpStatus(old, "/primary") == 503) {
      sawNotWritable = true;
      out.timeToNotWritable = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - *cutAt);
    }
    {
      std::lock_guard lock(mu);
      if (newPrimaryAt && sawNotWritable) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the local client keeps trying the old host
  done = true;
  carefulThread.join();
  localThread.join();
  hostileThread.join();
  if (!newPrimaryAt) {
    out.error = "the careful client never wrote on a new primary";
    return out;
  }
  out.timeToNewPrimary = std::chrono::duration_cast<std::chrono::milliseconds>(*newPrimaryAt - *cutAt);
  out.newPrimary = h.writablePrimary();
  if (out.newPrimary < 0 || out.newPrimary == old) {
    out.error = "no writable primary other than the old one after the cut";
    return out;
  }
  std::set<int> present = h.intColumn(out.newPrimary, "SELECT id FROM part");
  for (int id : out.carefulAcked) {
    if (!present.count(id)) out.carefulLost.insert(id);
  }
  for (int id : out.localAcked) {
    if (!present.count(id)) out.localLost.insert(id);
  }
  for (int id : out.hostileAcked) {
    if (!present.count(id)) out.hostileLost.insert(id);
  }
  return out;
}

}  // namespace dugong::e2e
