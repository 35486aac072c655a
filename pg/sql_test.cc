#include "pg/sql.h"

#include <gtest/gtest.h>

namespace dugong::pg {
namespace {

TEST(PgUrl, ParsesUserHostPortDatabase) {
  auto u = parsePgUrl("tcp://postgres@10.0.0.5:5433/mydb");
  ASSERT_TRUE(u.ok()) << u.error();
  EXPECT_EQ(u->user, "postgres");
  EXPECT_EQ(u->host, "10.0.0.5");
  EXPECT_EQ(u->port, 5433);
  EXPECT_EQ(u->database, "mydb");
}

TEST(PgUrl, DefaultsPortAndDatabase) {
  auto u = parsePgUrl("tcp://db.example");
  ASSERT_TRUE(u.ok()) << u.error();
  EXPECT_EQ(u->host, "db.example");
  EXPECT_EQ(u->port, 5432);
  EXPECT_EQ(u->database, "postgres");
  EXPECT_EQ(u->user, "");
}

TEST(PgUrl, Ipv6InBrackets) {
  auto u = parsePgUrl("tcp://postgres@[::1]:6000/postgres");
  ASSERT_TRUE(u.ok()) << u.error();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 6000);
}

TEST(PgUrl, RejectsBadInput) {
  EXPECT_FALSE(parsePgUrl("http://x:5432/").ok());
  EXPECT_FALSE(parsePgUrl("tcp://postgres@:5432/").ok());
  EXPECT_FALSE(parsePgUrl("tcp://h:0/").ok());
  EXPECT_FALSE(parsePgUrl("tcp://h:70000/").ok());
  EXPECT_FALSE(parsePgUrl("tcp://h:12ab/").ok());
  EXPECT_FALSE(parsePgUrl("tcp://[::1/").ok());
}

TEST(Conninfo, QuotesValues) {
  EXPECT_EQ(buildConninfo({{"host", "h"}, {"password", "it's a \\ secret"}}),
            "host='h' password='it\\'s a \\\\ secret'");
}

TEST(SqlQuoting, LiteralsAndIdentifiers) {
  EXPECT_EQ(quoteLiteral("a'b"), "'a''b'");
  EXPECT_EQ(quoteIdent("we\"ird"), "\"we\"\"ird\"");
}

TEST(RunQuery, ConnectionErrorIsAValue) {
  auto r = runQuery("host=127.0.0.1 port=1 user=x dbname=x", "SELECT 1", std::chrono::milliseconds(2000));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cannot connect"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace dugong::pg
