// Operator logs: one line per decision, in plain words (text), or one JSON object per
// line (json) for machines:
//   {"time": "2026-11-22T21:50:10.123Z", "level": "info", "logger": "dugong",
//    "message": "...", "peer": "<peer id>", "generation": 7}
// "generation" is the generation of the last cluster state this peer has seen, null
// before the first one.
#pragma once

#include <cstdint>
#include <string>

#include "statemachine/result.h"

namespace dugong::agent {

// Sets spdlog's default logger to stderr with this level ("trace" .. "error") and
// format ("text" or "json"). `peerId` is written on every JSON line.
Result<bool> setupLogging(const std::string& level, const std::string& format, const std::string& peerId);
// For the watchdog process, once forked: its lines go where the agent's do, but a write
// never blocks it there (the agent may be the one stuck on that pipe or socket: a hung
// journald, a pipe nobody reads). A line that cannot be written at once waits, with a
// few others, for the next flush; older ones beyond that are dropped.
void logWithoutBlocking();
// Changes the level of every logger (SIGHUP).
Result<bool> setLogLevel(const std::string& level);
// The level in force now, in log.level's words ("trace", "debug", "info", "warn", ...).
std::string logLevel();
// The generation written on every JSON line from now on. Thread-safe; call it when a
// cluster state with a new generation is seen.
void setLogGeneration(int64_t generation);

}  // namespace dugong::agent
