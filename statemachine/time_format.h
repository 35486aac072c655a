// Wall-clock times as they appear in the cluster state. Pure: the caller passes the time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "statemachine/result.h"

namespace dugong {

// Milliseconds since the Unix epoch, UTC.
using EpochMs = int64_t;

// "2026-11-22T10:15:30.123Z".
std::string formatIso8601(EpochMs ms);

// Accepts ISO-8601 "YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM|-HH:MM]" (a space may stand for
// the T) or a whole number of milliseconds since the epoch.
Result<EpochMs> parseTime(std::string_view text);

}  // namespace dugong
