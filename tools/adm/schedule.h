// --scheduled TIME of `dugong-adm switchover` and `restart`: when to act. Pure: the
// text and the time now in, the time to act at (or why not) out. The waiting itself is
// waitUntilScheduled (tools/adm/commands.h).
#pragma once

#include <optional>
#include <string>

#include "statemachine/result.h"
#include "statemachine/time_format.h"

namespace dugong::adm {

// The furthest a scheduled operation may lie ahead: the command waits in the foreground.
constexpr EpochMs kMaxScheduleAheadMs = 7LL * 24 * 3600 * 1000;

// An ISO 8601 time with its zone ("2026-11-29T22:00:00Z", "2026-11-29 23:00:00+01:00";
// statemachine/time_format.h parseTime) strictly after `now` and at most
// kMaxScheduleAheadMs ahead. Refused: a time without a zone (it would be read in some
// host's zone), a bare number, a time in the past or now, one too far ahead; each
// error names the time read and now.
Result<EpochMs> parseScheduled(const std::string& text, EpochMs now);

// The --scheduled option as given: empty means now (nullopt), anything else as above.
Result<std::optional<EpochMs>> parseScheduledOption(const std::string& text, EpochMs now);

}  // namespace dugong::adm
