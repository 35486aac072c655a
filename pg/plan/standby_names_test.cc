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

}  // namespace
}  // namespace dugong::pg
