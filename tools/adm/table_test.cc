#include "tools/adm/table.h"

#include <gtest/gtest.h>

namespace dugong::adm {
namespace {

TEST(FormatTable, PadsColumnsToTheWidestCellAndUppercasesTheHeader) {
  std::string t = formatTable({"role", "peer", "lag"}, {{"primary", "a", "-"}, {"sync", "bravo", "0m01s"}});
  EXPECT_EQ(t,
            "ROLE     PEER   LAG\n"
            "primary  a      -\n"
            "sync     bravo  0m01s\n");
}

TEST(FormatTable, OmitsTheHeaderAndNeverEndsALineInSpaces) {
  std::string t = formatTable({"a", "b"}, {{"x", ""}, {"long", "y"}}, /*withHeader=*/false);
  EXPECT_EQ(t, "x\nlong  y\n");
}

TEST(FormatTable, ShortRowsPrintEmptyCellsAndExtraCellsAreDropped) {
  EXPECT_EQ(formatTable({"a", "b"}, {{"1"}, {"2", "3", "4"}}, false), "1\n2  3\n");
  EXPECT_EQ(formatTable({"a"}, {}, false), "");
}

TEST(ParseColumns, AcceptsKnownNamesInTheGivenOrder) {
  auto c = parseColumns("lag, Peer,role", {"role", "peer", "lag"});
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(*c, (std::vector<std::string>{"lag", "peer", "role"}));
}

TEST(ParseColumns, RejectsUnknownEmptyAndRepeatedNames) {
  auto unknown = parseColumns("role,bogus", {"role", "peer"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().find("unknown column \"bogus\""), std::string::npos);
  EXPECT_NE(unknown.error().find("role, peer"), std::string::npos);
  EXPECT_FALSE(parseColumns("", {"role"}).ok());
  EXPECT_FALSE(parseColumns("role,,peer", {"role", "peer"}).ok());
  auto twice = parseColumns("role,role", {"role"});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().find("twice"), std::string::npos);
}

}  // namespace
}  // namespace dugong::adm
