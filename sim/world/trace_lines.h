// A TraceSink that keeps every line ("<kind> <text>"), for the tests of sim/world.
#pragma once

#include <string>
#include <vector>

#include "sim/world/trace_sink.h"

namespace dugong::simworld {

class TraceLines final : public TraceSink {
 public:
  TraceLines() : TraceSink(true) {}
  std::vector<std::string> lines;

 protected:
  void record(char kind, std::string text) override { lines.push_back(std::string(1, kind) + " " + text); }
};

}  // namespace dugong::simworld
