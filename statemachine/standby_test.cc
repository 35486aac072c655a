#include "statemachine/standby.h"

#include <functional>

#include <gtest/gtest.h>

#include "statemachine/cluster_state.h"
#include "statemachine/peer_test_support.h"

namespace dugong {
namespace {
using peer_test::cluster;
using peer_test::ident;
using peer_test::kT0;
using peer_test::peers;

StandbySource dugongSource() {
  StandbySource s;
  s.kind = SourceKind::kDugong;
  s.cluster = "siteA";
  s.zookeeper = {{"a1", 2181}, {"a2", 2181}};
  s.root = "/dugong/siteA";
  return s;
}

ClusterState standbyCluster(int64_t gen, const std::string& leader, const std::string& sync,
                            std::vector<std::string> async = {}) {
  ClusterState s = cluster(gen, leader, sync, std::move(async));
  s.standby = StandbyMode{dugongSource(), std::nullopt, nullptr};
  return s;
}

TEST(HostPort, ParsesNamesAddressesAndBracketedIpv6) {
  auto h = HostPort::parse("db-1.example.com:5432");
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h->host, "db-1.example.com");
  EXPECT_EQ(h->port, 5432);
  h = HostPort::parse("[fd00::1]:2181");
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h->host, "fd00::1");
  EXPECT_EQ(h->toString(), "[fd00::1]:2181");
  EXPECT_EQ(HostPort::parse("10.0.0.7:65535")->toString(), "10.0.0.7:65535");
  for (const char* bad : {"", ":5432", "h1", "h1:", "h1:54x2", "h1:123456", "[fd00::1]", "[fd00::1]5432", "h/1:5432"}) {
    EXPECT_FALSE(HostPort::parse(bad).ok()) << bad;
  }
}

TEST(StandbySource, IsDescribedByItsKind) {
  StandbySource s = dugongSource();
  EXPECT_EQ(s.describe(), "dugong siteA (a1:2181,a2:2181/dugong/siteA)");
  s.chroot = "/zk";
  EXPECT_EQ(s.describe(), "dugong siteA (a1:2181,a2:2181/zk/dugong/siteA)");
  StandbySource hosts;
  hosts.kind = SourceKind::kHosts;
  hosts.hosts = {{"h1", 5432}, {"::1", 5433}};
  EXPECT_EQ(hosts.describe(), "hosts h1:5432, [::1]:5433");
  StandbySource repo;
  repo.kind = SourceKind::kPgbackrest;
  repo.restore = SourceRepository{"siteA", {}};
  EXPECT_EQ(repo.describe(), "pgbackrest stanza siteA");
  EXPECT_EQ(sourceKindName(SourceKind::kHosts), std::string("hosts"));
  // Written with the keys of its kind only, and read back the same.
  for (const StandbySource& source : {s, hosts, repo}) {
    auto back = StandbySource::fromJson(source.toJson(), "source");
    ASSERT_TRUE(back.ok()) << back.error();
    EXPECT_EQ(*back, source);
  }
  EXPECT_FALSE(hosts.toJson().contains("root"));
  EXPECT_FALSE(s.toJson().contains("hosts"));
}

TEST(StandbyRequests, APromoteClusterRequestIsValidatedAsAPromoteRequestIs) {
  const ClusterState state = standbyCluster(4, "b1", "b2", {"b3"});
  const nlohmann::json valid = {
      {"by", "ops@jump1"}, {"sourceGone", true}, {"generation", 4}, {"expireTime", formatIso8601(kT0 + 60000)}};
  auto r = validateStandbyPromote(valid, state, kT0);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->by, "ops@jump1");
  EXPECT_TRUE(r->sourceGone);
  EXPECT_EQ(r->generation, 4);
  EXPECT_EQ(r->expireTime, kT0 + 60000);
  struct Case {
    std::function<void(nlohmann::json&)> mutate;
    std::string error;
  };
  std::vector<Case> cases = {
      {[](auto& j) { j = "now"; }, "promote-cluster request is not an object"},
      {[](auto& j) { j["id"] = "b1"; }, "promote-cluster request: id is not a field of a promote-cluster request"},
      {[](auto& j) { j.erase("by"); }, "promote-cluster request: by must be a string"},
      {[](auto& j) { j["generation"] = "4"; }, "promote-cluster request: generation must be an integer"},
      {[](auto& j) { j["expireTime"] = 5; }, "promote-cluster request: expireTime must be a string"},
      {[](auto& j) { j["expireTime"] = "soon"; }, "promote-cluster request: expireTime: "},
      {[](auto& j) { j.erase("sourceGone"); }, "promote-cluster request: sourceGone must be a boolean"},
      {[](auto& j) { j["generation"] = 3; }, "promote-cluster request is for generation 3 but the cluster is at 4"},
      {[](auto& j) { j["expireTime"] = formatIso8601(kT0 - 1); },
       "promote-cluster request expired at " + formatIso8601(kT0 - 1)},
  };
  for (const auto& c : cases) {
    nlohmann::json j = valid;
    c.mutate(j);
    auto v = validateStandbyPromote(j, state, kT0);
    ASSERT_FALSE(v.ok()) << c.error;
    EXPECT_EQ(v.error().rfind(c.error, 0), 0u) << "got: \"" << v.error() << "\" want: " << c.error;
  }
  EXPECT_EQ(validateStandbyPromote(valid, cluster(4, "b1", "b2"), kT0).error(),
            "promote-cluster request: the cluster is not a standby cluster");
}

TEST(StandbyRequests, ADemoteClusterRequestNamesAValidSource) {
  const ClusterState state = cluster(9, "a1", "a2", {"a3"});
  const nlohmann::json valid = {{"source", {{"kind", "hosts"}, {"hosts", {"b1:5432"}}}},
                                {"by", "ops@jump1"},
                                {"generation", 9},
                                {"expireTime", formatIso8601(kT0 + 1)}};
  auto r = validateDemote(valid, state, kT0);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->source.kind, SourceKind::kHosts);
  EXPECT_EQ(r->source.hosts, (std::vector<HostPort>{{"b1", 5432}}));
  EXPECT_EQ(r->generation, 9);
  nlohmann::json j = valid;
  j["source"]["hosts"] = {"b1"};
  EXPECT_EQ(validateDemote(j, state, kT0).error(),
            "demote-cluster request: source.hosts[0]: expected \"host:port\", got \"b1\"");
  j = valid;
  j.erase("source");
  EXPECT_EQ(validateDemote(j, state, kT0).error(), "demote-cluster request: source is missing");
  j = valid;
  j["sourceGone"] = false;
  EXPECT_EQ(validateDemote(j, state, kT0).error(),
            "demote-cluster request: sourceGone is not a field of a demote-cluster request");
  EXPECT_EQ(validateDemote("x", state, kT0).error(), "demote-cluster request is not an object");
  EXPECT_EQ(validateDemote(valid, state, kT0 + 2).error(),
            "demote-cluster request expired at " + formatIso8601(kT0 + 1));
  EXPECT_EQ(validateDemote(valid, cluster(10, "a1", "a2"), kT0).error(),
            "demote-cluster request is for generation 9 but the cluster is at 10");
  EXPECT_EQ(validateDemote(valid, standbyCluster(9, "a1", "a2"), kT0).error(),
            "demote-cluster request: the cluster is a standby cluster already");
}

TEST(SourceEndpoint, ComparesThePeerByIdAndAddress) {
  SourceEndpoint a;
  a.kind = SourceKind::kDugong;
  a.peer = ident("a2");
  a.cluster = "siteA";
  a.slotName = "dugong_site_siteB";
  SourceEndpoint b = a;
  b.peer->zoneId = "elsewhere";  // not how it is reached
  EXPECT_TRUE(a == b);
  b.peer->pgUrl = "tcp://postgres@a2:6432/postgres";
  EXPECT_FALSE(a == b);
  b = a;
  b.peer = ident("a3");
  EXPECT_FALSE(a == b);
  b = a;
  b.peer.reset();
  EXPECT_FALSE(a == b);
  b = a;
  b.restore = SourceRepository{"siteA", {{"repo1-path", "/srv"}}};
  EXPECT_FALSE(a == b);
  EXPECT_EQ(a.toJson()["peer"]["id"], "a2");
  EXPECT_EQ(a.toJson()["slot"], "dugong_site_siteB");
  EXPECT_EQ(b.toJson()["restore"]["options"]["repo1-path"], "/srv");
  SourceEndpoint hosts;
  hosts.kind = SourceKind::kHosts;
  hosts.hosts = {{"h1", 5432}};
  EXPECT_EQ(hosts.toJson()["hosts"], nlohmann::json::array({"h1:5432"}));
  EXPECT_FALSE(hosts.toJson().contains("peer"));
}

// promote-cluster's refusals (0083 6.1), one row per case: this cluster (siteB) is a
// standby of siteA; what its leader sees of siteA, the flag, and the verdict.
TEST(PromoteClusterRefusal, RefusesWhatTheDesignRefuses) {
  const ClusterState siteB = standbyCluster(12, "b1", "b2", {"b3"});
  // How siteA's state is seen: normal (primary a1), or demoted with its point.
  ObservedSourceState normal;
  normal.generation = 9;
  normal.primary = "a1";
  normal.sync = "a2";
  StandbySource towardB = dugongSource();
  towardB.cluster = "siteB";
  towardB.root = "/dugong/siteB";
  ObservedSourceState demoted = normal;
  demoted.standby = StandbyMode{towardB, DemotionPoint{WalPosition(0x4FFFF28), 2}, nullptr};
  ObservedSourceState demotedElsewhere = demoted;
  demotedElsewhere.standby->source.cluster = "siteC";
  demotedElsewhere.standby->source.root = "/dugong/siteC";
  ObservedSourceState loop = demoted;
  loop.standby->demotedAt.reset();
  ObservedSourceState standbyOfC = demotedElsewhere;
  standbyOfC.standby->demotedAt.reset();

  auto view = [](std::optional<ObservedSourceState> st, bool present = false) {
    PromoteClusterView v;
    v.leaderPresent = true;
    v.leaderRunsAsStandbyLeader = true;
    v.leaderTimeline = 2;
    v.cluster = "siteB";
    v.root = "/dugong/siteB";
    v.source.reachable = true;
    v.source.state = std::move(st);
    v.source.primaryPresent = present;
    return v;
  };
  const std::string flag = ": if it is gone, promote-cluster --source-gone (what this cluster did not receive is lost)";
  struct Row {
    std::string what;
    std::function<void(ClusterState&, PromoteClusterView&)> change;
    std::string withoutFlag;  // "" goes ahead
    std::string withFlag;
    bool waits = false;       // the planned case: waits for siteA's demotion point
  };
  std::vector<Row> rows = {
      {"a normal cluster", [](auto& s, auto&) { s.standby.reset(); },
       "the cluster is not a standby cluster: there is nothing to promote",
       "the cluster is not a standby cluster: there is nothing to promote"},
      {"frozen", [](auto& s, auto&) { s.freeze = true; }, "the cluster is frozen: unfreeze it first",
       "the cluster is frozen: unfreeze it first"},
      {"leader absent", [](auto&, auto& v) { v.leaderPresent = false; },
       "the standby leader b1 is not present: wait for its sync to take over as standby leader",
       "the standby leader b1 is not present: wait for its sync to take over as standby leader"},
      {"leader not running", [](auto&, auto& v) { v.leaderRunsAsStandbyLeader = false; },
       "the standby leader b1's postgres does not run as standby leader yet: wait for it",
       "the standby leader b1's postgres does not run as standby leader yet: wait for it"},
      {"siteA writable and present", [&](auto&, auto& v) { v = view(normal, true); },
       "the source siteA has a writable primary, a1 (generation 9, present): demote that site (dugong-adm "
       "demote-cluster) or stop it first; --source-gone does not override a primary this cluster can see",
       "the source siteA has a writable primary, a1 (generation 9, present): demote that site (dugong-adm "
       "demote-cluster) or stop it first; --source-gone does not override a primary this cluster can see"},
      {"siteA's /primary answers 200", [&](auto&, auto& v) { v.source.primaryWritable = true; },
       "the source siteA has a writable primary, a1 (its /primary answers 200): demote that site",
       "the source siteA has a writable primary, a1 (its /primary answers 200): demote that site"},
      {"siteA between primaries", [&](auto&, auto&) {},
       "the source siteA has no writable primary now (its primary a1 is absent; its sync may take over at any "
       "moment), but it is not gone" + flag,
       ""},
      {"siteA unreachable",
       [&](auto&, auto& v) {
         v.source = SourceObservation{};
         v.source.lastSeen = "unreachable since 00:12:03; its primary was a1, generation 9";
       },
       "the source siteA cannot be reached (unreachable since 00:12:03; its primary was a1, generation 9)" + flag, ""},
      {"siteA's ensemble answers, no state", [&](auto&, auto& v) { v.source.state.reset(); },
       "the source siteA has no cluster state" + flag, ""},
      {"siteA demoted toward siteB: planned", [&](auto&, auto& v) { v = view(demoted); }, "", "", true},
      {"siteA demoted toward siteB, its leader present (a standby leader)",
       [&](auto&, auto& v) { v = view(demoted, true); }, "", "", true},
      {"siteA demoted, stale: siteB promoted since",
       [&](auto&, auto& v) {
         v = view(demoted);
         v.leaderTimeline = 3;
       },
       "the source siteA's demotion (0/04ffff28 on timeline 2) is not at the end of this cluster's history (its leader "
       "is on timeline 3): a stale demotion" + flag,
       ""},
      {"siteA demoted, this leader still behind it (a source failover not replayed yet)",
       [&](auto&, auto& v) {
         v = view(demoted);
         v.leaderTimeline = 1;
       },
       "the source siteA's demotion (0/04ffff28 on timeline 2) has not reached this cluster yet (its leader is on "
       "timeline 1, before it): ask again once the leader has replayed it (its lag in dugong-adm show); --source-gone "
       "would promote without it, losing what the source acknowledged past the leader's replay",
       ""},
      {"siteA demoted, this leader's timeline not read",
       [&](auto&, auto& v) {
         v = view(demoted);
         v.leaderTimeline.reset();
       },
       "the source siteA's demotion (0/04ffff28 on timeline 2) is not at the end of this cluster's history (its leader "
       "is on a timeline not read): a stale demotion" + flag,
       ""},
      {"siteA demoted toward siteC", [&](auto&, auto& v) { v = view(demotedElsewhere); },
       "the source siteA was demoted toward another cluster (dugong siteC (a1:2181,a2:2181/dugong/siteC)), which may "
       "be writable" + flag,
       ""},
      {"siteA a standby of siteC, not demoted", [&](auto&, auto& v) { v = view(standbyOfC); },
       "the source siteA is a standby cluster of dugong siteC (a1:2181,a2:2181/dugong/siteC), not demoted" + flag, ""},
      {"siteA a standby of siteB by hand: a loop", [&](auto&, auto& v) { v = view(loop); },
       "the source siteA is a standby cluster of this one, not demoted by demote-cluster: a loop made by hand; set "
       "this cluster's source right first (dugong-adm standby set-source)",
       "the source siteA is a standby cluster of this one, not demoted by demote-cluster: a loop made by hand; set "
       "this cluster's source right first (dugong-adm standby set-source)"},
      {"a hosts source with a writable host",
       [&](auto& s, auto& v) {
         s.standby->source = StandbySource{SourceKind::kHosts, "", {}, "", "", {{"h1", 5432}, {"h2", 5432}}, {}};
         v.source.state.reset();
         v.source.writableHosts = {{"h2", 5432}};
       },
       "the source hosts h1:5432, h2:5432 has a writable host, h2:5432 (not in recovery): demote that site",
       "the source hosts h1:5432, h2:5432 has a writable host, h2:5432 (not in recovery): demote that site"},
      {"a hosts source, none writable",
       [&](auto& s, auto& v) {
         s.standby->source = StandbySource{SourceKind::kHosts, "", {}, "", "", {{"h1", 5432}}, {}};
         v.source.state.reset();
       },
       "the source hosts h1:5432 has no writable host now, but it is not gone" + flag, ""},
      {"a hosts source, unreachable",
       [&](auto& s, auto& v) {
         s.standby->source = StandbySource{SourceKind::kHosts, "", {}, "", "", {{"h1", 5432}}, {}};
         v.source = SourceObservation{};
       },
       "the source hosts h1:5432 cannot be reached" + flag, ""},
      {"a repository",
       [&](auto& s, auto& v) {
         s.standby->source = StandbySource{SourceKind::kPgbackrest, "", {}, "", "", {}, SourceRepository{"siteA", {}}};
         v.source = SourceObservation{};
       },
       "the source is a pgBackRest repository (stanza siteA): no primary can be seen there" + flag, ""},
  };
  for (const Row& row : rows) {
    for (bool sourceGone : {false, true}) {
      ClusterState state = siteB;
      PromoteClusterView v = view(normal);
      row.change(state, v);
      const PromoteClusterVerdict verdict = promoteClusterRefusal(state, sourceGone, v);
      const std::string& want = sourceGone ? row.withFlag : row.withoutFlag;
      if (want.empty()) {
        EXPECT_TRUE(verdict.ok()) << row.what << (sourceGone ? " (--source-gone)" : "") << ": " << *verdict.refusal;
        EXPECT_EQ(verdict.waitFor.has_value(), row.waits) << row.what;
        if (row.waits) {
          EXPECT_EQ(*verdict.waitFor, (DemotionPoint{WalPosition(0x4FFFF28), 2})) << row.what;
        }
      } else {
        ASSERT_FALSE(verdict.ok()) << row.what << (sourceGone ? " (--source-gone)" : "");
        EXPECT_EQ(verdict.refusal->rfind(want, 0), 0u)
            << row.what << (sourceGone ? " (--source-gone)" : "") << "\n got: " << *verdict.refusal
            << "\nwant: " << want;
      }
    }
  }
}

TEST(ObservedSourceState, KeepsWhatTheDecisionsNeed) {
  ClusterState s = standbyCluster(5, "a1", "a2", {"a3"});
  s.standby->demotedAt = DemotionPoint{WalPosition(0x100), 3};
  ObservedSourceState o = ObservedSourceState::of(s);
  EXPECT_EQ(o.generation, 5);
  EXPECT_EQ(o.primary, "a1");
  EXPECT_EQ(o.sync, "a2");
  EXPECT_FALSE(o.oneNodeWriteMode);
  ASSERT_TRUE(o.standby.has_value());
  EXPECT_EQ(o.standby->demotedAt->timeline, 3);
  s = cluster(6, "a1", "a2");
  s.sync.reset();
  s.oneNodeWriteMode = true;
  o = ObservedSourceState::of(s);
  EXPECT_FALSE(o.sync.has_value());
  EXPECT_TRUE(o.oneNodeWriteMode);
  EXPECT_FALSE(o.standby.has_value());
}

// Phase 8 (0083 "Phase 8 as built") runs a standby state of every kind of source, with or
// without a `restore` repository, its promote-cluster request, and a demote request
// toward a `hosts` or `dugong` source with no repository. A peer that reads a demote
// request toward a repository halts with the reason, as on a state of a newer format: no
// write, no fence, no apply; postgres keeps what it had (0083 2.3). It resumes on a state
// it runs.
TEST(StandbyFormat, AFormat3StateThisBuildDoesNotRunHaltsThePeer) {
  const std::string notYet = " is not run by this dugong yet (docs/decisions/0083, phase 8 runs a standby cluster "
                             "of any source, its promote-cluster, and demote-cluster toward a hosts or dugong source "
                             "with no repository): nothing is done with it";
  StandbySource dugongRestoring = dugongSource();
  dugongRestoring.restore = SourceRepository{"siteA", {}};
  ClusterState demoting = cluster(7, "p", "me", {"d"});
  demoting.demote = {{"source", dugongRestoring.toJson()}, {"by", "ops"}, {"generation", 7},
                     {"expireTime", formatIso8601(kT0 + 60000)}};
  const std::vector<std::pair<ClusterState, std::string>> cases = {
      {demoting, "a demote-cluster request toward a source with a repository (restore, stanza siteA)"},
  };
  for (const auto& [format3, what] : cases) {
    ASSERT_TRUE(ClusterState::parse(format3.serialize(), ClusterState::Formats::kSyncAndStandby).ok()) << what;
    peer_test::Harness h;
    h.start(cluster(6, "p", "me", {"d"}), {"p", "me", "d"});
    h.applied(true);
    auto actions = h.step(ClusterStateChanged{peer_test::node(format3, 1)});
    ASSERT_EQ(actions.size(), 1u) << what;
    const auto log = std::get<LogDecision>(actions[0]);
    EXPECT_EQ(log.level, LogLevel::kError);
    EXPECT_EQ(log.message, "invalid cluster state (version 1): cluster state: " + what + notYet +
                               "; not acting until a valid state is written");
    EXPECT_EQ(h.peer.inspect()["halted"], log.message);
    // Its primary gone, this sync would take over: it does nothing.
    EXPECT_TRUE(h.step(ActivePeersChanged{peers({"me", "d"})}).empty());
    EXPECT_FALSE(h.peer.busy());
    actions = h.step(ClusterStateChanged{peer_test::node(cluster(8, "p", "me", {"d"}), 2)});
    EXPECT_FALSE(h.peer.haltReason().has_value());
    EXPECT_TRUE(peer_test::logged(actions, "valid cluster state found again (version 2)"));
  }
}

// A standby state of a `pgbackrest` source, and of a `hosts` or `dugong` source with a
// `restore` repository, is run (0083 "Phase 8 as built"): nothing in it halts the peer.
TEST(StandbyFormat, ARepositorySourceAndARestoreAreRun) {
  ClusterState repository = standbyCluster(7, "p", "me", {"d"});
  repository.standby->source = *parseSourceUrl("pgbackrest://sitea");
  ClusterState hostsRestoring = standbyCluster(7, "p", "me", {"d"});
  hostsRestoring.standby->source = *parseSourceUrl("hosts://h1:5432");
  hostsRestoring.standby->source.restore = SourceRepository{"sitea", {{"repo1-path", "/srv/pgbackrest"}}};
  ClusterState dugongRestoring = standbyCluster(7, "p", "me", {"d"});
  dugongRestoring.standby->source = dugongSource();
  dugongRestoring.standby->source.restore = SourceRepository{"sitea", {}};
  for (const ClusterState& s : {repository, hostsRestoring, dugongRestoring}) {
    auto parsed = ClusterState::parse(s.serialize(), ClusterState::Formats::kSyncAndStandby);
    ASSERT_TRUE(parsed.ok()) << parsed.error();
    EXPECT_EQ(standbyStateNotRun(parsed.value()), std::nullopt) << s.standby->source.describe();
  }
}

// The pgbackrest form of dugong.yaml (0083 2.4): "pgbackrest://<stanza>"; the repository
// options come from dugong.yaml's standby.restore (agent/config.cc), checked there by
// pgBackRest's rules. Its endpoint restores from the stanza and streams from nothing.
TEST(StandbySource, ParsesThePgbackrestFormOfDugongYaml) {
  auto s = parseSourceUrl("pgbackrest://site-a");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->kind, SourceKind::kPgbackrest);
  ASSERT_TRUE(s->restore.has_value());
  EXPECT_EQ(s->restore->stanza, "site-a");
  EXPECT_TRUE(s->restore->options.empty());
  EXPECT_EQ(s->describe(), "pgbackrest stanza site-a");
  auto back = StandbySource::fromJson(s->toJson(), "x");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, *s);
  const SourceEndpoint e = sourceEndpoint(*s, std::nullopt);
  EXPECT_EQ(e.kind, SourceKind::kPgbackrest);
  EXPECT_EQ(e.restore, s->restore);
  EXPECT_FALSE(e.peer.has_value());
  EXPECT_TRUE(e.hosts.empty());
  EXPECT_EQ(e.slotName, "");
  EXPECT_EQ(e.describe(), "pgbackrest (restoring from stanza site-a)");
  // The other kinds, by the same function, keep their restore.
  StandbySource hosts = *parseSourceUrl("hosts://h1:5432");
  hosts.restore = SourceRepository{"sitea", {}};
  EXPECT_EQ(sourceEndpoint(hosts, std::nullopt), hostsEndpoint(hosts));
  EXPECT_EQ(sourceEndpoint(hosts, std::nullopt).describe(), "hosts h1:5432 (restoring from stanza sitea)");
  const StandbySource siteA = dugongSource();
  EXPECT_EQ(sourceEndpoint(siteA, std::nullopt), dugongEndpoint(siteA, std::nullopt));
  auto expected = [](const std::string& url) {
    return "expected \"hosts://host:port[,host:port...]\", \"dugong://zkhost:port[,zkhost:port...]/root\" or "
           "\"pgbackrest://stanza\", got \"" + url + "\"";
  };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"pgbackrest://", "no stanza in " + expected("pgbackrest://")},
      {"pgbackrest://site a", "the stanza \"site a\" has a character other than a letter, a digit, '-' or '_' in " +
                                  expected("pgbackrest://site a")},
      {"pgbackrest://sitea/x", "the stanza \"sitea/x\" has a character other than a letter, a digit, '-' or '_' in " +
                                   expected("pgbackrest://sitea/x")},
  };
  for (const auto& [url, error] : refused) {
    auto r = parseSourceUrl(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.error(), error) << url;
  }
}

TEST(StandbySource, ParsesTheHostsFormOfDugongYaml) {
  auto s = parseSourceUrl("hosts://db1:5432,[fd00::2]:5433");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->kind, SourceKind::kHosts);
  ASSERT_EQ(s->hosts.size(), 2u);
  EXPECT_EQ(s->hosts[1].host, "fd00::2");
  EXPECT_EQ(s->hosts[1].port, 5433);
  EXPECT_EQ(s->describe(), "hosts db1:5432, [fd00::2]:5433");
  EXPECT_EQ(hostsEndpoint(*s).describe(), "hosts db1:5432, [fd00::2]:5433");
  EXPECT_EQ(hostsEndpoint(*s).slotName, "");
  // What every refusal ends with.
  auto expected = [](const std::string& url) {
    return "expected \"hosts://host:port[,host:port...]\", \"dugong://zkhost:port[,zkhost:port...]/root\" or "
           "\"pgbackrest://stanza\", got \"" + url + "\"";
  };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"db1:5432", expected("db1:5432")},
      {"hosts://", "expected \"host:port\", got \"\" in " + expected("hosts://")},
      {"hosts://db1:5432,", "expected \"host:port\", got \"\" in " + expected("hosts://db1:5432,")},
      {"hosts://db1:70000", "port 70000 is out of range (1-65535) in \"db1:70000\" in " + expected("hosts://db1:70000")},
      {"dugong://a1:2181", "no root after the ensemble in " + expected("dugong://a1:2181")},
      {"dugong://a1:2181/", "standby.source.cluster must not be empty in " + expected("dugong://a1:2181/")},
      {"dugong://a1/dugong/siteA", "expected \"host:port\", got \"a1\" in " + expected("dugong://a1/dugong/siteA")},
      {"dugong://a1:2181/dugong//siteA", "standby.source.root must be an absolute path like /dugong/siteA, got "
                                         "\"/dugong//siteA\" in " + expected("dugong://a1:2181/dugong//siteA")},
  };
  for (const auto& [url, error] : refused) {
    auto r = parseSourceUrl(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.error(), error) << url;
  }
}

// The dugong form (0083 2.4; phase 5 as built): the ensemble, then the root; the cluster
// name is the root's last component; no chroot.
TEST(StandbySource, ParsesTheDugongFormOfDugongYaml) {
  auto s = parseSourceUrl("dugong://a1:2181,[fd00::3]:2182/dugong/siteA");
  ASSERT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(s->kind, SourceKind::kDugong);
  EXPECT_EQ(s->zookeeperConnect(), "a1:2181,[fd00::3]:2182");
  EXPECT_EQ(s->root, "/dugong/siteA");
  EXPECT_EQ(s->cluster, "siteA");
  EXPECT_EQ(s->chroot, "");
  EXPECT_EQ(s->describe(), "dugong siteA (a1:2181,[fd00::3]:2182/dugong/siteA)");
  // What the state stores, read back.
  auto back = StandbySource::fromJson(s->toJson(), "x");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, *s);
  EXPECT_EQ(parseSourceUrl("dugong://z:1/one")->cluster, "one");
}

// demote-cluster's refusals (0083 5.1; phase 4 as built), each row one reason, in the
// order dugong-adm checks them; a healthy normal cluster demoted toward a hosts source
// (reachable or not: not checked) is not refused.
TEST(DemoteClusterRefusal, RefusesWhatTheDesignRefuses) {
  const StandbySource siteB = *parseSourceUrl("hosts://b1:5432,b2:5432");
  DemoteClusterView healthy;
  healthy.primaryPresent = true;
  healthy.syncPresent = true;
  healthy.syncStreams = true;
  healthy.ownHosts = {HostPort{"a1", 5432}, HostPort{"a2", 5432}};
  const ClusterState normal = cluster(5, "p", "s", {"a"});
  EXPECT_EQ(demoteClusterRefusal(normal, siteB, healthy), std::nullopt);

  struct Row {
    std::string name;
    std::function<void(ClusterState&, StandbySource&, DemoteClusterView&)> change;
    std::string refusal;
  };
  const std::vector<Row> rows = {
      {"standby already", [](ClusterState& s, StandbySource&, DemoteClusterView&) {
         s.standby = StandbyMode{*parseSourceUrl("hosts://c1:5432"), std::nullopt, nullptr};
       }, "the cluster is a standby cluster of hosts c1:5432 already: there is nothing to demote"},
      {"pending", [](ClusterState& s, StandbySource& src, DemoteClusterView&) {
         s.demote = {{"source", src.toJson()}, {"by", "ops"}, {"generation", 5}, {"expireTime", "x"}};
       }, "a demote-cluster request is pending already"},
      {"frozen", [](ClusterState& s, StandbySource&, DemoteClusterView&) { s.freeze = true; },
       "the cluster is frozen: unfreeze it first"},
      {"one-node-write", [](ClusterState& s, StandbySource&, DemoteClusterView&) { s.oneNodeWriteMode = true; },
       "the cluster is in one-node-write mode"},
      {"quorum", [](ClusterState& s, StandbySource&, DemoteClusterView&) { s.quorum = Quorum{1, {ident("s")}}; },
       "the cluster is in quorum mode"},
      {"pgbackrest source", [](ClusterState&, StandbySource& src, DemoteClusterView&) {
         src = StandbySource{};
         src.kind = SourceKind::kPgbackrest;
         src.restore = SourceRepository{"siteB", {}};
       }, "a demotion toward pgbackrest stanza siteB is not run by this dugong yet"},
      {"a repository", [](ClusterState&, StandbySource& src, DemoteClusterView&) {
         src.restore = SourceRepository{"siteB", {}};
       }, "is not run by this dugong yet"},
      {"itself", [](ClusterState&, StandbySource& src, DemoteClusterView&) { src.hosts.push_back({"a2", 5432}); },
       "the source names a2:5432, a peer of this cluster: it would follow itself"},
      {"no primary", [](ClusterState&, StandbySource&, DemoteClusterView& v) { v.primaryPresent = false; },
       "the primary p is not present"},
      {"no sync", [](ClusterState&, StandbySource&, DemoteClusterView& v) { v.syncPresent = false; },
       "the sync s is not present: wait for a healthy sync"},
      {"sync behind", [](ClusterState&, StandbySource&, DemoteClusterView& v) {
         v.syncStreams = false;
         v.syncDetail = "catchup";
       }, "the sync s does not stream synchronously (catchup)"},
  };
  for (const Row& row : rows) {
    ClusterState s = normal;
    StandbySource src = siteB;
    DemoteClusterView v = healthy;
    row.change(s, src, v);
    auto refusal = demoteClusterRefusal(s, src, v);
    ASSERT_TRUE(refusal.has_value()) << row.name;
    EXPECT_NE(refusal->find(row.refusal), std::string::npos) << row.name << ": " << *refusal;
  }
}

}  // namespace
}  // namespace dugong

namespace dugong {
namespace {

// Which source peer the standby leader of a dugong source streams from (0083 3.2): the
// source's sync; its primary without one; a standby source's leader's sync likewise.
TEST(SourceUpstream, IsTheSourcesSyncElseItsPrimary) {
  ClusterState normal = cluster(9, "a1", "a2", {"a3"});
  PeerIdentity up = sourceUpstream(ObservedSourceState::of(normal));
  EXPECT_EQ(up.id, "a2");
  EXPECT_EQ(up.pgUrl, ident("a2").pgUrl);

  ClusterState onwm = cluster(9, "a1", "a2", {});
  onwm.sync.reset();
  onwm.oneNodeWriteMode = true;
  EXPECT_EQ(sourceUpstream(ObservedSourceState::of(onwm)).id, "a1");

  ClusterState demoted = standbyCluster(10, "a1", "a2", {"a3"});
  demoted.standby->demotedAt = DemotionPoint{WalPosition(900), 2};
  EXPECT_EQ(sourceUpstream(ObservedSourceState::of(demoted)).id, "a2");

  // A quorum-mode source (docs/decisions/0089): its first member, whose WAL a takeover
  // that reads it never passes by.
  ClusterState quorum = cluster(9, "a1", "a2", {});
  quorum.sync.reset();
  quorum.quorum = Quorum{1, {ident("a3"), ident("a2")}};
  const ObservedSourceState seen = ObservedSourceState::of(quorum);
  EXPECT_EQ(sourceUpstream(seen).id, "a3");
  EXPECT_EQ(seen.sync, "a3");
}

}  // namespace
}  // namespace dugong
