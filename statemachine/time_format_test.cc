#include "statemachine/time_format.h"

#include <gtest/gtest.h>

namespace dugong {
namespace {

TEST(TimeFormat, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(formatIso8601(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(formatIso8601(1767225600000), "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(formatIso8601(951782400123), "2000-02-29T00:00:00.123Z");
  EXPECT_EQ(formatIso8601(-1), "1969-12-31T23:59:59.999Z");
}

TEST(TimeFormat, ParsesIsoAndEpochMilliseconds) {
  EXPECT_EQ(*parseTime("2026-01-01T00:00:00.000Z"), 1767225600000);
  EXPECT_EQ(*parseTime("2026-01-01T00:00:00Z"), 1767225600000);
  EXPECT_EQ(*parseTime("2026-01-01 01:00:00+01:00"), 1767225600000);
  EXPECT_EQ(*parseTime("2025-12-31T23:00:00-0100"), 1767225600000);
  EXPECT_EQ(*parseTime("2026-01-01T00:00:00.5z"), 1767225600500);
  EXPECT_EQ(*parseTime("1767225600000"), 1767225600000);
  for (EpochMs t : {EpochMs{0}, EpochMs{951782400123}, EpochMs{1767225612345}}) {
    EXPECT_EQ(*parseTime(formatIso8601(t)), t);
  }
}

TEST(TimeFormat, RejectsWhatIsNotATime) {
  for (const char* bad : {"", "test", "2026-01-01", "2026-01-01T00:00:00", "2026-13-01T00:00:00Z",
                          "2026-02-30T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:00:00.Z",
                          "2026-01-01T00:00:00Zjunk", "2026-01-01T00:00:00+25:00", "12345678901234567"}) {
    auto t = parseTime(bad);
    EXPECT_FALSE(t.ok()) << bad;
    if (!t.ok()) {
      EXPECT_NE(t.error().find("invalid time"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace dugong
