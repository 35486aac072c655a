// A new peer made from a pgBackRest repository against one made by pg_basebackup from its
// upstream: a 3-peer cluster with archiving on, a database of `megabytes` MB
// (default 1024), a full backup taken from the sync, then `after-megabytes` MB (default
// 64) written after the backup. A 4th peer is added with replica-methods
// pgbackrest,basebackup, then a 5th with basebackup alone. For each: the time from its
// agent's start until it streams, and the bytes the existing peers' postgres sent over TCP
// meanwhile (iptables byte counters on their ports: the new peer's copy and stream; the
// other standbys' streams at rest are a few KB; the bench waits until they have caught
// up). With pgbackrest the upstream should send only the WAL written since the backup
// that is not in the archive yet.
//
// Then the rebuild of a peer whose data directory has files: an async's agent and
// postgres stop, `after-megabytes` more are written, its data directory is set aside as
// a rebuild does (<dataDir>.dugong-old, the incomplete marker) and `dugong-adm rebuild`
// makes it again, (a) by pgbackrest: restore --delta into a copy of the old directory,
// (b) by pgbackrest with no old directory (a plain restore), (c) by pg_basebackup. For
// each: the time until it streams again, the bytes the other peers sent, and what
// pgBackRest restored from the repository (its restore log at detail level names each
// file it restored and each that "exists and matches backup"; sizes as it prints them,
// uncompressed).
//
// Needs root (iptables) and pgbackrest; the repository is a directory of its own in /tmp.
//
//   build/dev/bench/backup_replica_bench [megabytes] [after-megabytes]
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pg/command.h"
#include "pg/pgbackrest.h"
#include "tests/e2e/cluster_harness.h"

using namespace std::chrono_literals;
using dugong::e2e::Harness;
using dugong::e2e::HarnessOptions;
namespace fs = std::filesystem;
namespace pg = dugong::pg;

namespace {

pg::CommandResult run(std::vector<std::string> argv) {
  pg::CommandSpec spec;
  spec.argv = std::move(argv);
  spec.timeout = std::chrono::hours(2);
  return pg::runCommand(spec);
}

void check(const pg::CommandResult& r, const std::string& what) {
  if (!r.ok()) {
    std::cerr << what << " failed: " << r.describe() << "\n" << r.output << "\n";
    throw std::runtime_error("bench failed");
  }
}

// A byte counter on the TCP traffic sent from `port` (loopback), as an iptables rule in
// OUTPUT with no target; removed by the destructor.
class PortCounter {
 public:
  explicit PortCounter(int port) : port_(std::to_string(port)) { check(run(rule("-I")), "iptables -I"); }
  ~PortCounter() { (void)run(rule("-D")); }
  long long bytes() const {
    auto r = run({"/usr/sbin/iptables", "-L", "OUTPUT", "-v", "-x", "-n"});
    std::istringstream in(r.output);
    std::string line;
    const std::string comment = "dugong-backup-bench-" + port_;
    while (std::getline(in, line)) {
      if (line.find(comment) == std::string::npos) continue;
      std::istringstream f(line);
      long long packets = 0, bytes = 0;
      f >> packets >> bytes;
      return bytes;
    }
    return -1;
  }

 private:
  std::vector<std::string> rule(const std::string& op) const {
    return {"/usr/sbin/iptables", op, "OUTPUT", "-o", "lo", "-p", "tcp", "--sport", port_, "-m", "comment",
            "--comment", "dugong-backup-bench-" + port_};
  }
  std::string port_;
};

struct Made {
  std::string method;  // the replica method that made the data directory (its agent's log)
  double seconds = 0;
  long long upstreamBytes = 0;
};

// Waits until every standby has replayed the primary's current position, so that the
// counters see the new peer's traffic only (a cascaded async may be far behind a load).
// `stopped`: a peer that is down, not waited for.
void waitCaughtUp(Harness& h, int stopped = -1) {
  const int primary = h.writablePrimary();
  const std::string lsn = h.peer(primary).pg->value("SELECT pg_current_wal_lsn()::text");
  for (int i = 0; i < h.size(); ++i) {
    if (i == primary || i == stopped) continue;
    const bool ok = h.waitFor(
        [&] {
          return h.peer(i).pg->value("SELECT pg_last_wal_replay_lsn() >= '" + lsn + "'::pg_lsn") == "t";
        },
        std::chrono::minutes(20));
    if (!ok) {
      std::cerr << h.peer(i).id << " does not catch up with " << lsn << "\n";
      throw std::runtime_error("bench failed");
    }
  }
}

// Adds a peer, starts it, waits until it streams; the bytes the peers before it sent.
Made addPeer(Harness& h, int streamingBefore) {
  waitCaughtUp(h);
  std::vector<std::unique_ptr<PortCounter>> counters;
  for (int i = 0; i < h.size(); ++i) counters.push_back(std::make_unique<PortCounter>(h.peer(i).pg->options.port));
  const int added = h.addPeer();
  const auto t0 = std::chrono::steady_clock::now();
  h.startAgent(added);
  if (h.waitForHealthyCluster(streamingBefore + 1, std::chrono::hours(1)) < 0) {
    std::cerr << "the new peer does not stream:\n" << h.describe() << h.logTail(added, 60);
    throw std::runtime_error("bench failed");
  }
  Made m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& c : counters) m.upstreamBytes += c->bytes();
  const std::string log = h.logTail(added, 2000);
  m.method = log.find("made by replica method pgbackrest") != std::string::npos   ? "pgbackrest"
             : log.find("made by replica method basebackup") != std::string::npos ? "basebackup"
                                                                                   : "?";
  return m;
}

// pgBackRest's size as it logs it ("8KB", "16MB", "1.2GB") in bytes.
double loggedBytes(const std::string& size) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(size, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const std::string unit = size.substr(used);
  const double scale = unit == "KB" ? 1024.0 : unit == "MB" ? 1024.0 * 1024 : unit == "GB" ? 1024.0 * 1024 * 1024 : 1;
  return v * scale;
}

// What the restore log says from byte `from` on: the bytes restored from the repository,
// and those already in place ("exists and matches backup").
struct Restored {
  double fromRepo = 0;
  double matched = 0;
};
Restored restoredSince(const std::string& logPath, std::uintmax_t from) {
  std::ifstream in(logPath);
  in.seekg(static_cast<std::streamoff>(from));
  Restored out;
  std::string line;
  while (std::getline(in, line)) {
    // "... DETAIL: restore file /d/base/5/1259 (96KB, 0.01%) checksum ..." or
    // "... DETAIL: restore file /d/base/5/1259 - exists and matches backup (96KB, 0.01%) checksum ..."
    if (line.find("DETAIL: restore file ") == std::string::npos) continue;
    const auto open = line.find(" (");
    const auto comma = line.find(',', open);
    if (open == std::string::npos || comma == std::string::npos) continue;
    const double bytes = loggedBytes(line.substr(open + 2, comma - open - 2));
    (line.find("exists and matches backup") != std::string::npos ? out.matched : out.fromRepo) += bytes;
  }
  return out;
}

std::uintmax_t sizeOf(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : n;
}

struct Rebuilt {
  std::string how;
  double seconds = 0;
  long long peerBytes = 0;
  Restored restored;
};

// Stops peer `i` (agent, postgres), writes `afterMb` MB on the primary, sets its data
// directory aside as a rebuild does (kept unless `keepOld` is false), rebuilds it with
// `dugong-adm rebuild` and restarts its agent; measured until it streams again.
Rebuilt rebuildPeer(Harness& h, int i, const std::string& how, bool keepOld, long afterMb, const std::string& table,
                    const std::string& restoreLog,
                    const std::function<void(long, const std::string&)>& load) {
  h.stopAgent(i);
  // An agent stopped in the middle of a start may leave a postmaster that comes up a
  // moment later: stopped until none has been there for a second.
  for (int tries = 0; tries < 30; ++tries) {
    h.peer(i).pg->forceStop();
    std::this_thread::sleep_for(1s);
    if (!h.peer(i).pg->postmasterPid()) break;
  }
  load(afterMb, table);
  waitCaughtUp(h, i);
  const std::string data = h.peer(i).pg->options.dataDir;
  std::error_code ec;
  fs::remove_all(data + ".dugong-old", ec);
  if (keepOld) {
    fs::rename(data, data + ".dugong-old", ec);
  } else {
    fs::remove_all(data, ec);
  }
  std::ofstream(data + ".dugong-incomplete") << "bench\n";
  std::vector<std::unique_ptr<PortCounter>> counters;
  for (int p = 0; p < h.size(); ++p) {
    if (p != i) counters.push_back(std::make_unique<PortCounter>(h.peer(p).pg->options.port));
  }
  const std::uintmax_t logFrom = sizeOf(restoreLog);
  const auto t0 = std::chrono::steady_clock::now();
  check(run({DUGONG_ADM_BINARY, "--zk", h.zkConnect(), "-c", "bkbench", "rebuild", "-y", "--config",
             h.peer(i).configPath}),
        "dugong-adm rebuild (" + how + ")");
  h.startAgent(i);
  if (h.waitForHealthyCluster(h.size() - 1, std::chrono::hours(1)) < 0) {
    std::cerr << "the rebuilt peer does not stream:\n" << h.describe() << h.logTail(i, 60);
    throw std::runtime_error("bench failed");
  }
  Rebuilt r;
  r.how = how;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& c : counters) r.peerBytes += c->bytes();
  r.restored = restoredSince(restoreLog, logFrom);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const long mb = argc > 1 ? std::atol(argv[1]) : 1024;
  const long afterMb = argc > 2 ? std::atol(argv[2]) : 64;
  char tmpl[] = "/tmp/dugong-backup-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  const passwd* pw = ::getpwnam("postgres");
  for (const std::string sub : {"", "/repo", "/log", "/lock"}) {
    fs::create_directories(dir + sub);
    if (pw) (void)::chown((dir + sub).c_str(), pw->pw_uid, pw->pw_gid);
  }
  const std::map<std::string, std::string> repo = {{"repo1-path", dir + "/repo"},
                                                    {"log-path", dir + "/log"},
                                                    {"lock-path", dir + "/lock"},
                                                    {"log-level-file", "detail"}};
  try {
    HarnessOptions o;
    o.cluster = "bkbench";
    Harness h(o);
    auto admSet = [&](const std::string& methods) {
      std::vector<std::string> args = {DUGONG_ADM_BINARY, "--zk", h.zkConnect(), "-c", o.cluster, "config", "set",
                                       "backup.archive=on", "backup.replica-methods=" + methods};
      for (const auto& [k, v] : repo) args.push_back("backup." + k + "=" + v);
      check(run(args), "dugong-adm config set");
    };
    admSet("pgbackrest,basebackup");
    h.startAll();
    const int primary = h.waitForHealthyCluster(2, 180s);
    if (primary < 0) return 1;
    pg::PgOptions p;
    p.dataDir = h.peer(primary).pg->options.dataDir;
    p.port = h.peer(primary).pg->options.port;
    const int sync = h.indexWithRole("sync");
    pg::PgOptions s;
    s.dataDir = h.peer(sync).pg->options.dataDir;
    s.port = h.peer(sync).pg->options.port;
    auto pgbackrest = [&](const std::string& command, std::vector<std::string> extra = {}) {
      check(pg::runPgBackRest(pg::pgBackRestArgv("bkbench", repo, p, command, extra), p, std::chrono::hours(2)),
            "pgbackrest " + command);
    };
    pgbackrest("stanza-create");
    std::cout << "loading " << mb << " MB\n";
    auto load = [&](long megabytes, const std::string& table) {
      // About 1 KB per row of md5 text (compresses like ordinary data, not like zeros).
      const long rows = megabytes * 1000;
      auto r = h.sql(primary, "CREATE TABLE " + table + " AS SELECT g, repeat(md5(g::text), 30) AS pad "
                              "FROM generate_series(1, " + std::to_string(rows) + ") g",
                     std::chrono::hours(1));
      if (!r) {
        std::cerr << "load: " << r.error() << "\n";
        throw std::runtime_error("bench failed");
      }
    };
    load(mb, "big");
    // Settled as a table that has been there a while: autovacuum's first pass over a new
    // table (hint bits, the visibility map; with wal_log_hints a full-page image of every
    // page after the checkpoint) would otherwise write as much WAL as the table after the
    // backup, and the new peers would replay it.
    (void)h.sql(primary, "VACUUM (FREEZE, ANALYZE) big", std::chrono::hours(1));
    (void)h.sql(primary, "CHECKPOINT", 600s);
    const auto b0 = std::chrono::steady_clock::now();
    pgbackrest("backup", {"--pg2-path=" + s.dataDir, "--pg2-socket-path=" + s.socketPath(),
                          "--pg2-port=" + std::to_string(s.port), "--pg2-user=postgres", "--backup-standby",
                          "--type=full", "--start-fast"});
    std::cout << "full backup from the standby: "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count() << " s\n";
    load(afterMb, "after_backup");
    std::cout << "database: " << h.peer(primary).pg->value("SELECT pg_size_pretty(pg_database_size('postgres'))")
              << "\n";

    const Made restored = addPeer(h, 2);
    admSet("basebackup");
    const Made copied = addPeer(h, 3);
    std::printf("RESULT megabytes=%ld after_backup_megabytes=%ld\n", mb, afterMb);
    for (const Made* m : {&restored, &copied}) {
      std::printf("RESULT made by %s: %.1f s until streaming, %.1f MB sent by the peers' postgres\n",
                  m->method.c_str(), m->seconds, m->upstreamBytes / 1e6);
    }
    std::fflush(stdout);

    // Rebuilds of the peer made by pgbackrest (an async), its data directory there.
    const std::string restoreLog = dir + "/log/bkbench-restore.log";
    const int again = 3;
    admSet("pgbackrest,basebackup");
    const Rebuilt delta = rebuildPeer(h, again, "pgbackrest, delta into a copy", true, afterMb, "after_delta",
                                      restoreLog, load);
    const Rebuilt plain = rebuildPeer(h, again, "pgbackrest, plain (no old directory)", false, afterMb,
                                      "after_plain", restoreLog, load);
    admSet("basebackup");
    const Rebuilt base = rebuildPeer(h, again, "pg_basebackup", true, afterMb, "after_base", restoreLog, load);
    for (const Rebuilt* r : {&delta, &plain, &base}) {
      std::printf("RESULT rebuilt by %s: %.1f s until streaming, %.1f MB sent by the peers' postgres, %.1f MB "
                  "restored from the repository, %.1f MB already in place\n",
                  r->how.c_str(), r->seconds, r->peerBytes / 1e6, r->restored.fromRepo / 1e6,
                  r->restored.matched / 1e6);
    }
  } catch (const std::exception& e) {  // the harness has stopped what it started
    std::cerr << e.what() << "\n";
    return 1;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
