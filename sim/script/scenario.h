// Scenario scripts for dugong-sim: JSON lines, one step per line:
//   {"cmd": NAME, "args": [...], "wait": null|MS, "check": null|OBJECT}
// A step runs the command and captures its result at once; `wait: MS` then advances
// virtual time by MS, and `wait: null` runs until the world is at rest (failing if that
// takes more than 10000 virtual ms). `check` must be a deep subset of the result.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "statemachine/result.h"
#include "sim/script/script_world.h"

namespace dugong::sim {

// Long enough for the longest bounded wait of the shipped driver to settle: a
// switchover that the (simulated) sync never carries out keeps the primary's postgres
// stopped for handoverWaitMs + 500 ms, then restarts it (2 s here): 7.5 s.
constexpr int64_t kRestLimitMs = 10000;

// Deep-subset comparison: every key of an expected object must match in the actual
// object (extra keys are allowed); an expected array constrains only the first N
// elements of the actual array; scalars must be equal. Returns the path of the first
// mismatch, like ".zkstate.async[0]", or nothing when `expected` matches.
std::optional<std::string> findMismatch(const nlohmann::json& expected, const nlohmann::json& actual,
                                        const std::string& path = "");

// Runs a whole script. Prints echo lines and, on the first failure, the step, the
// path and both values to `out`. Returns true when every step passed.
bool runScript(std::istream& script, const std::string& name, ScriptWorld& world, std::ostream& out);

// Runs one step given as a JSON object; returns the command's result, or the reason the
// step failed (a failed command, a failed check, or a world that did not come to rest).
Result<nlohmann::json> runStep(const nlohmann::json& step, ScriptWorld& world);

}  // namespace dugong::sim
