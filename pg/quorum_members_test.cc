#include "pg/quorum_members.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

const std::vector<std::string> kMembers = {"peer-s1", "peer's2"};

QueryResult answer(Row row) { return {{}, {std::move(row)}}; }

TEST(QuorumMembersView, QueryReadsThePrimaryFirstThenEachMemberQuoted) {
  const std::string q = quorumMembersQuery(kMembers);
  const auto primary = q.find("pg_current_wal_flush_lsn()");
  const auto s1 = q.find("application_name = 'peer-s1'");
  const auto s2 = q.find("application_name = 'peer''s2'");
  ASSERT_NE(primary, std::string::npos) << q;
  ASSERT_NE(s1, std::string::npos) << q;
  ASSERT_NE(s2, std::string::npos) << q;
  EXPECT_LT(primary, s1);
  EXPECT_LT(s1, s2);
}

TEST(QuorumMembersView, ParsesEveryMemberAndOneWithoutWalsender) {
  auto v = parseQuorumMembersView(kMembers, answer({"0/5000100", "1", "0/50000A0", "0", std::nullopt}));
  ASSERT_TRUE(v.ok()) << v.error();
  EXPECT_EQ(v->primaryFlushed, WalPosition::parse("0/5000100").value());
  ASSERT_EQ(v->members.size(), 2u);
  EXPECT_TRUE(v->members.at("peer-s1").streaming);
  EXPECT_EQ(v->members.at("peer-s1").flushed, WalPosition::parse("0/50000A0").value());
  EXPECT_FALSE(v->members.at("peer's2").streaming);
  EXPECT_FALSE(v->members.at("peer's2").flushed);
}

TEST(QuorumMembersView, MalformedAnswersAreErrors) {
  EXPECT_FALSE(parseQuorumMembersView(kMembers, QueryResult{}).ok());
  EXPECT_FALSE(parseQuorumMembersView(kMembers, answer({"0/1", "1", "0/1"})).ok());  // a column short
  EXPECT_FALSE(parseQuorumMembersView(kMembers, answer({std::nullopt, "1", "0/1", "1", "0/1"})).ok());
  EXPECT_EQ(parseQuorumMembersView(kMembers, answer({"0/1", "x", "0/1", "1", "0/1"})).error(),
            "unexpected walsender count of member peer-s1: x");
  EXPECT_EQ(parseQuorumMembersView(kMembers, answer({"0/1", "1", "0/1", std::nullopt, "0/1"})).error(),
            "unexpected walsender count of member peer's2: NULL");
  EXPECT_FALSE(parseQuorumMembersView(kMembers, answer({"0/1", "1", "nonsense", "1", "0/1"})).ok());
  EXPECT_FALSE(parseQuorumMembersView(kMembers, answer({"nonsense", "1", "0/1", "1", "0/1"})).ok());
}

}  // namespace
}  // namespace dugong::pg
