// One line for each of the driver core's commands (driver/command.h) and timers: the
// transcripts of driver/testdata/ and traces read them.
#pragma once

#include <string>

#include "driver/command.h"

namespace dugong::driver {

const char* timerKindName(TimerKind kind);
std::string describeTimer(const TimerKey& key);
std::string describeCommand(const Command& command);

}  // namespace dugong::driver
