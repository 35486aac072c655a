#include "pg/sync_standby.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

QueryResult answer(std::optional<std::string> streaming, std::optional<std::string> flushed,
                   std::optional<std::string> waiting) {
  return {{"streaming", "flushed", "waiting"}, {{std::move(streaming), std::move(flushed), std::move(waiting)}}};
}

TEST(SyncStandbyView, QueryNamesTheStandbyQuoted) {
  const std::string q = syncStandbyQuery("peer'b");
  EXPECT_NE(q.find("application_name = 'peer''b'"), std::string::npos) << q;
  EXPECT_NE(q.find("wait_event = 'SyncRep'"), std::string::npos) << q;
}

TEST(SyncStandbyView, ParsesAStreamingStandbyAndWaitingCommits) {
  auto v = parseSyncStandbyView(answer("1", "0/3000148", "2"));
  ASSERT_TRUE(v.ok()) << v.error();
  EXPECT_TRUE(v->streaming);
  EXPECT_EQ(v->flushed, WalPosition::parse("0/3000148").value());
  EXPECT_EQ(v->waitingCommits, 2);
}

TEST(SyncStandbyView, NoWalsenderHasNoFlushPosition) {
  auto v = parseSyncStandbyView(answer("0", std::nullopt, "0"));
  ASSERT_TRUE(v.ok()) << v.error();
  EXPECT_FALSE(v->streaming);
  EXPECT_FALSE(v->flushed);
  EXPECT_EQ(v->waitingCommits, 0);
}

TEST(SyncStandbyView, MalformedAnswersAreErrors) {
  EXPECT_FALSE(parseSyncStandbyView(QueryResult{}).ok());
  EXPECT_FALSE(parseSyncStandbyView(answer(std::nullopt, std::nullopt, "0")).ok());
  EXPECT_EQ(parseSyncStandbyView(answer("x", std::nullopt, "0")).error(),
            "unexpected counts in the synchronous standby query: x, 0");
  EXPECT_FALSE(parseSyncStandbyView(answer("1", "nonsense", "0")).ok());
}

}  // namespace
}  // namespace dugong::pg
