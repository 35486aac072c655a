// Operator logs: one line per decision, in plain words (text), or one JSON object per
// line (json) for machines: {"time", "level", "logger", "msg"}.
#pragma once

#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

// Sets spdlog's default logger to stderr with this level ("trace" .. "error") and
// format ("text" or "json").
Result<bool> setupLogging(const std::string& level, const std::string& format);
// Changes the level of every logger (SIGHUP).
Result<bool> setLogLevel(const std::string& level);

}  // namespace dugong::agent
