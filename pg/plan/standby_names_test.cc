#include "pg/plan/standby_names.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

TEST(StandbyNamesTest, ParsesEveryFormPostgresAccepts) {
  auto plain = parseStandbyNames("db1, \"DB 2\"");
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_EQ(plain->count, 1);
  EXPECT_EQ(plain->names, (std::vector<std::string>{"db1", "DB 2"}));
  auto first = parseStandbyNames("FIRST 2 (a, \"b\"\"c\")");
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(first->method, StandbyNames::Method::kFirst);
  EXPECT_EQ(first->count, 2);
  EXPECT_EQ(first->names, (std::vector<std::string>{"a", "b\"c"}));
  auto any = parseStandbyNames("any 1 (x)");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->method, StandbyNames::Method::kAny);
  auto bare = parseStandbyNames("3 (a, b, c)");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->count, 3);
  EXPECT_EQ(parseStandbyNames("")->count, 0);
  EXPECT_EQ(parseStandbyNames("first")->names, std::vector<std::string>{"first"});  // a standby named first
  for (const char* bad : {"a,", "FIRST 1 (a", "\"unterminated", "a b", "2 a", "(a)"}) {
    EXPECT_FALSE(parseStandbyNames(bad).ok()) << bad;
  }
}

TEST(StandbyNamesTest, ExactMatchIsNotASubstringMatch) {
  EXPECT_TRUE(waitsForExactly("\"db1\"", "db1"));
  EXPECT_TRUE(waitsForExactly("FIRST 1 (DB1)", "db1"));  // postgres ignores case
  EXPECT_FALSE(waitsForExactly("\"db10\"", "db1"));
  EXPECT_FALSE(waitsForExactly("\"db1\"", "db10"));
  EXPECT_FALSE(waitsForExactly("db1, db2", "db1"));        // db2 would do when db1 is gone
  EXPECT_FALSE(waitsForExactly("ANY 1 (db1, db2)", "db1"));
  EXPECT_FALSE(waitsForExactly("*", "db1"));
  EXPECT_FALSE(waitsForExactly("", "db1"));
  EXPECT_FALSE(waitsForExactly("2 (db1)", "db1"));
}

TEST(StandbyNamesTest, WaitsForAllNeedsEveryNameAcknowledged) {
  EXPECT_TRUE(waitsForAll("FIRST 2 (\"db2\", \"db1\")", {"db2", "db1"}));
  EXPECT_TRUE(waitsForAll("ANY 2 (db1, DB2)", {"db2", "db1"}));  // both must answer either way
  EXPECT_FALSE(waitsForAll("FIRST 1 (db2, db1)", {"db2", "db1"}));  // one of them would do
  EXPECT_FALSE(waitsForAll("FIRST 2 (db2, db1, db3)", {"db2", "db1"}));  // db3 could stand in
  EXPECT_FALSE(waitsForAll("FIRST 2 (db2, db10)", {"db2", "db1"}));
  EXPECT_FALSE(waitsForAll("FIRST 2 (db2, *)", {"db2", "db1"}));
  EXPECT_FALSE(waitsForAll("FIRST 2 (db2, db2)", {"db2", "db1"}));
  EXPECT_FALSE(waitsForAll("", {}));
}

TEST(StandbyNamesTest, AQuorumIsWrittenWithEveryNameQuotedAndReadBackAsPostgresReadsIt) {
  // Names postgres would otherwise read differently or refuse: upper case (folded
  // without quotes), a space, a comma, parentheses, a double and a single quote, a
  // leading digit, a keyword.
  const StandbyQuorum q{2, {"db1", "DB 2", "a,b", "x(y)", "say \"hi\"", "it's", "9lives", "any"}};
  const std::string text = renderQuorum(q);
  EXPECT_EQ(text, "ANY 2 (\"db1\", \"DB 2\", \"a,b\", \"x(y)\", \"say \"\"hi\"\"\", \"it's\", \"9lives\", "
                  "\"any\")");
  auto parsed = parseStandbyNames(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->method, StandbyNames::Method::kAny);
  EXPECT_EQ(parsed->count, 2);
  EXPECT_EQ(parsed->names, q.members);  // a quoted name keeps its case and its characters
  EXPECT_EQ(renderQuorum({1, {"db2", "db3"}}), "ANY 1 (\"db2\", \"db3\")");
  EXPECT_EQ(quoteStandbyName("\""), "\"\"\"\"");
}

TEST(StandbyNamesTest, WaitsForQuorum) {
  const StandbyQuorum q{1, {"db2", "db3"}};
  struct Row {
    const char* text;
    bool waits;
  };
  const Row rows[] = {
      {"ANY 1 (\"db2\", \"db3\")", true},
      {"any 1 (db3, DB2)", true},                  // order and case do not matter
      {"ANY 2 (\"db2\", \"db3\")", false},         // another k
      {"FIRST 1 (\"db2\", \"db3\")", false},       // the first by priority, not any
      {"1 (db2, db3)", false},                     // FIRST
      {"db2, db3", false},                         // FIRST 1
      {"ANY 1 (\"db2\")", false},                  // a member missing
      {"ANY 1 (db2, db3, db4)", false},            // another standby could acknowledge
      {"ANY 1 (db2, db30)", false},                // not a substring match
      {"ANY 1 (db2, *)", false},                   // any standby could
      {"ANY 1 (db2, db2)", false},                 // one member twice, the other missing
      {"", false},
      {"ANY 1 (db2, db3", false},                  // what postgres would refuse
  };
  for (const Row& r : rows) EXPECT_EQ(waitsForQuorum(r.text, q), r.waits) << r.text;
  EXPECT_TRUE(waitsForQuorum("ANY 2 (\"a,b\", \"say \"\"hi\"\"\")", {2, {"A,B", "say \"hi\""}}));
  // A quorum of one is ANY 1 (x), never the plain name (postgres shows it as 'sync').
  EXPECT_TRUE(waitsForQuorum("ANY 1 (\"db2\")", {1, {"db2"}}));
  EXPECT_FALSE(waitsForQuorum("\"db2\"", {1, {"db2"}}));
  // A quorum that is not one is never waited for.
  EXPECT_FALSE(waitsForQuorum("ANY 0 (db2)", {0, {"db2"}}));
  EXPECT_FALSE(waitsForQuorum("ANY 3 (db2, db3)", {3, {"db2", "db3"}}));
}

TEST(StandbyNamesTest, ValidQuorum) {
  EXPECT_TRUE(validQuorum({1, {"db2", "db3"}}).ok());
  EXPECT_TRUE(validQuorum({2, {"db2", "db3"}}).ok());  // k = N: transiently (0079 section 2)
  EXPECT_EQ(validQuorum({1, {}}).error(), "a quorum needs at least one member");
  EXPECT_EQ(validQuorum({0, {"db2"}}).error(), "a quorum of 1 members cannot wait for 0");
  EXPECT_EQ(validQuorum({3, {"db2", "db3"}}).error(), "a quorum of 2 members cannot wait for 3");
  EXPECT_EQ(validQuorum({1, {"db2", ""}}).error(), "a quorum member has an empty name");
  EXPECT_EQ(validQuorum({1, {"db2", "DB2"}}).error(), "'DB2' is a quorum member twice");
  // Postgres takes "*", quoted or not, as any standby.
  EXPECT_EQ(validQuorum({1, {"db2", "*"}}).error(), "a quorum member named * would stand for any standby");
}

}  // namespace
}  // namespace dugong::pg
