#include "tools/adm/schedule.h"

namespace dugong::adm {

Result<EpochMs> parseScheduled(const std::string& text, EpochMs now) {
  const std::string expected = "expected an ISO 8601 time with its zone, such as " + formatIso8601(now + 3600 * 1000) +
                               " or 2026-11-29T23:00:00+01:00";
  if (text.empty() || text.find_first_not_of("0123456789") == std::string::npos) {
    return Error{"--scheduled \"" + text + "\": " + expected};
  }
  auto at = parseTime(text);
  if (!at) return Error{"--scheduled \"" + text + "\": not a time with its zone: " + expected};
  if (*at <= now) {
    return Error{"--scheduled " + text + " (" + formatIso8601(*at) + ") is in the past: it is now " +
                 formatIso8601(now) + "; nothing was done"};
  }
  if (*at - now > kMaxScheduleAheadMs) {
    return Error{"--scheduled " + text + " is more than 7 days ahead (it is now " + formatIso8601(now) +
                 "): schedule it closer, or from cron or a systemd timer"};
  }
  return *at;
}

Result<std::optional<EpochMs>> parseScheduledOption(const std::string& text, EpochMs now) {
  if (text.empty()) return std::optional<EpochMs>();
  auto at = parseScheduled(text, now);
  if (!at) return Error{at.error()};
  return std::optional<EpochMs>(*at);
}

}  // namespace dugong::adm
