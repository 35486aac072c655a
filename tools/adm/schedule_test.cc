#include "tools/adm/schedule.h"

#include <gtest/gtest.h>

namespace dugong::adm {
namespace {

const EpochMs kNow = *parseTime("2026-11-29T12:00:00Z");

std::string refusal(const std::string& text) {
  auto r = parseScheduled(text, kNow);
  return r.ok() ? "(accepted " + formatIso8601(*r) + ")" : r.error();
}

TEST(Schedule, AcceptsAFutureTimeWithItsZone) {
  EXPECT_EQ(parseScheduled("2026-11-29T12:00:01Z", kNow).value(), kNow + 1000);
  EXPECT_EQ(parseScheduled("2026-11-29 14:30:00+01:00", kNow).value(), kNow + 90 * 60 * 1000);
  EXPECT_EQ(parseScheduled("2026-12-06T12:00:00Z", kNow).value(), kNow + kMaxScheduleAheadMs);
}

TEST(Schedule, NoOptionMeansNow) {
  EXPECT_EQ(parseScheduledOption("", kNow).value(), std::nullopt);
  EXPECT_EQ(parseScheduledOption("2026-11-29T12:00:01Z", kNow).value(), kNow + 1000);
  EXPECT_FALSE(parseScheduledOption("2026-11-29T11:00:00Z", kNow).ok());
}

TEST(Schedule, RefusesThePastNowAndTheFarFuture) {
  EXPECT_EQ(refusal("2026-11-29T11:59:59Z"),
            "--scheduled 2026-11-29T11:59:59Z (2026-11-29T11:59:59.000Z) is in the past: it is now "
            "2026-11-29T12:00:00.000Z; nothing was done");
  EXPECT_NE(refusal("2026-11-29T12:00:00Z").find("is in the past"), std::string::npos);
  EXPECT_NE(refusal("2026-11-29T13:00:00+02:00").find("is in the past"), std::string::npos);
  EXPECT_NE(refusal("2026-12-06T12:00:00.001Z").find("more than 7 days ahead"), std::string::npos);
}

TEST(Schedule, RefusesWhatIsNotAnIso8601TimeWithItsZone) {
  for (const char* bad : {"", "tomorrow", "now", "2026-11-29T13:00:00", "2026-11-29", "1796041200000",
                          "2026-13-01T00:00:00Z", "2026-11-29T25:00:00Z", "2026-11-29T13:00:00Zjunk"}) {
    const std::string r = refusal(bad);
    EXPECT_NE(r.find("expected an ISO 8601 time with its zone"), std::string::npos) << bad << ": " << r;
  }
}

}  // namespace
}  // namespace dugong::adm
