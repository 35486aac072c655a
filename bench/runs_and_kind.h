// The command line of the benchmarks that take `[--runs N] [--kind K]`.
#pragma once

#include <optional>
#include <string>

namespace dugong::bench {

struct RunsAndKind {
  int runs = 10;
  std::string kind = "both";
};

// nullopt on anything else (the caller prints its usage).
inline std::optional<RunsAndKind> parseRunsAndKind(int argc, char** argv) {
  RunsAndKind out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      out.runs = std::stoi(argv[++i]);
    } else if (a == "--kind" && i + 1 < argc) {
      out.kind = argv[++i];
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace dugong::bench
