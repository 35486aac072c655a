// Measures the postgres adapter's role changes on real postgres instances (loopback,
// run as the postgres user): starting as primary, promoting the sync to a writable
// primary, changing the upstream of an async, and rebuilding a diverged ex-primary of
// DUGONG_BENCH_MB megabytes (default 1024) by pg_rewind and by pg_basebackup.
//
//   build-pg/pg/pg_role_bench [megabytes]
//
// Prints one line per measurement, and a JSON summary at the end.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "pg/controller.h"
#include "pg/testing/pg_test_cluster.h"
#include "bench/pg_bench_support.h"

using namespace std::chrono_literals;
using dugong::PgConfig;
using dugong::PgRole;
using dugong::pg::PgController;
using dugong::pg::testing::PgTestCluster;
using dugong::pg::testing::PgTestNode;

namespace {

using namespace dugong::bench;  // NOLINT(google-build-using-namespace)

// From: primary P (with sync S streaming, writable). Makes P diverge and S take over
// alone; returns with P stopped-as-primary holding WAL that S does not have.
void diverge(PgController& pp, const PgTestNode& p, PgController& ps, const PgTestNode& s) {
  must(ps.apply(PgConfig::none()), "stop the sync");
  (void)p.sql("INSERT INTO marker VALUES (now())", 1s);  // written locally, never acknowledged
  must(ps.apply(PgConfig::firstPrimary(std::nullopt)), "promote the sync alone");
  mustSql(s, "INSERT INTO marker VALUES (now())");
  (void)pp;
}

}  // namespace

int main(int argc, char** argv) {
  long megabytes = argc > 1 ? std::atol(argv[1]) : (std::getenv("DUGONG_BENCH_MB") ? std::atol(std::getenv("DUGONG_BENCH_MB")) : 1024);
  spdlog::set_level(spdlog::level::warn);
  PgTestCluster cluster("dugong-pg-bench");
  PgTestNode& a = cluster.addNode("peer-a");
  PgTestNode& b = cluster.addNode("peer-b");
  PgTestNode& c = cluster.addNode("peer-c");
  for (PgTestNode* n : {&a, &b, &c}) {
    n->options.settings["shared_buffers"] = "128MB";
    n->options.settings["max_wal_size"] = "2GB";
    n->options.settings["wal_keep_size"] = "2GB";
    n->options.basebackupTimeout = 3600s;
    n->options.rewindTimeout = 3600s;
  }
  auto pa = std::make_unique<PgController>(a.options);
  auto pb = std::make_unique<PgController>(b.options);
  auto pc = std::make_unique<PgController>(c.options);

  // 1. Start as primary: brand new (initdb), then an existing data directory.
  auto t = std::chrono::steady_clock::now();
  must(pa->apply(PgConfig::firstPrimary(std::nullopt)), "new primary");
  record("start_new_primary_with_initdb", seconds(std::chrono::steady_clock::now() - t));
  must(pa->apply(PgConfig::none()), "stop");
  t = std::chrono::steady_clock::now();
  must(pa->apply(PgConfig::firstPrimary(std::nullopt)), "primary");
  record("start_existing_primary", seconds(std::chrono::steady_clock::now() - t));
  mustSql(a, "CREATE TABLE marker (at timestamptz)");

  // 2. Sync and async; the primary waits for its sync.
  must(pa->apply(PgConfig::firstPrimary(b.identity)), "primary with sync");
  t = std::chrono::steady_clock::now();
  must(pb->apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity)), "sync");
  waitWritable(*pa, a);
  record("new_sync_basebackup_until_primary_writable", seconds(std::chrono::steady_clock::now() - t));
  must(pc->apply(PgConfig::standby(PgRole::kAsync, b.identity, a.identity)), "async");
  waitFor([&] { return streamsFrom(b, c); }, "the async to stream from the sync");

  // 3. Change the upstream of the async (sync -> primary), until it streams again.
  t = std::chrono::steady_clock::now();
  must(pc->apply(PgConfig::standby(PgRole::kAsync, a.identity, a.identity)), "re-point async");
  waitFor([&] { return streamsFrom(a, c); }, "the async to stream from the primary");
  record("async_change_upstream_until_streaming", seconds(std::chrono::steady_clock::now() - t));

  // 4. Promote the sync to a writable primary (the old primary gone, the async its new sync).
  must(pa->apply(PgConfig::none()), "stop the primary");
  t = std::chrono::steady_clock::now();
  must(pb->apply(PgConfig::firstPrimary(c.identity)), "promote");
  record("promote_sync_apply", seconds(std::chrono::steady_clock::now() - t));
  must(pc->apply(PgConfig::standby(PgRole::kSync, b.identity, b.identity)), "async becomes sync");
  waitWritable(*pb, b);
  mustSql(b, "INSERT INTO marker VALUES (now())");
  record("promote_sync_until_writable_commit", seconds(std::chrono::steady_clock::now() - t));
  must(pc->apply(PgConfig::none()), "stop c");
  must(pb->apply(PgConfig::firstPrimary(std::nullopt)), "b alone");

  // 5. A database of `megabytes` MB; a has it too (rebuilt as b's sync).
  must(pa->apply(PgConfig::standby(PgRole::kSync, b.identity, b.identity)), "a follows b");
  must(pb->apply(PgConfig::firstPrimary(a.identity)), "b with sync a");
  waitWritable(*pb, b);
  t = std::chrono::steady_clock::now();
  long rows = megabytes * 1024 * 1024 / 1000;  // ~1000 bytes per row on disk
  mustSql(b, "CREATE TABLE big AS SELECT g AS id, repeat(md5(g::text), 28) AS pad FROM generate_series(1, " +
                 std::to_string(rows) + ") g",
          3600s);
  mustSql(b, "CHECKPOINT");
  record("load_database", seconds(std::chrono::steady_clock::now() - t));
  std::string size = b.value("SELECT pg_size_pretty(pg_database_size('postgres'))");
  results["database_size"] = size;
  std::printf("database size: %s\n", size.c_str());
  waitFor([&] { return a.value("SELECT count(*) FROM pg_class WHERE relname = 'big'") == "1"; }, "a to have big");

  // 6. b diverges from a; a takes over; b is rebuilt by pg_rewind.
  diverge(*pb, b, *pa, a);
  t = std::chrono::steady_clock::now();
  must(pb->apply(PgConfig::standby(PgRole::kSync, a.identity, a.identity)), "rewind b");
  waitFor([&] { return streamsFrom(a, b); }, "b to stream from a");
  record("rebuild_diverged_by_pg_rewind", seconds(std::chrono::steady_clock::now() - t));

  // 7. a diverges from b; b takes over; a is rebuilt by pg_basebackup.
  must(pa->apply(PgConfig::firstPrimary(b.identity)), "a with sync b");
  waitWritable(*pa, a);
  diverge(*pa, a, *pb, b);
  dugong::pg::PgOptions noRewind = a.options;
  noRewind.useRewind = false;
  pa = std::make_unique<PgController>(noRewind);
  t = std::chrono::steady_clock::now();
  must(pa->apply(PgConfig::standby(PgRole::kSync, b.identity, b.identity)), "basebackup a");
  waitFor([&] { return streamsFrom(b, a); }, "a to stream from b");
  record("rebuild_diverged_by_pg_basebackup", seconds(std::chrono::steady_clock::now() - t));

  std::printf("%s\n", results.dump().c_str());
  return 0;
}
