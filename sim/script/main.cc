// dugong-sim: runs the real peer state machine (node1) on a simulated ZooKeeper and
// postgres, in virtual time, from scenario scripts or an interactive prompt.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "statemachine/time_format.h"
#include "sim/script/scenario.h"
#include "sim/script/script_world.h"

namespace {

using dugong::sim::ScriptWorld;

void traceTo(ScriptWorld& world, bool on) {
  if (!on) return;
  world.setTrace([](dugong::EpochMs now, const std::string& line) {
    std::cerr << dugong::formatIso8601(now).substr(11, 12) << " " << line << "\n";
  });
}

// "addpeer node4" or "promote {\"id\": ...}" or a whole JSON step.
nlohmann::json parseInteractive(const std::string& line) {
  if (!line.empty() && line[0] == '{') return nlohmann::json::parse(line, nullptr, false);
  std::istringstream in(line);
  std::string cmd;
  in >> cmd;
  nlohmann::json args = nlohmann::json::array();
  std::string rest;
  std::getline(in, rest);
  size_t pos = rest.find_first_not_of(' ');
  while (pos != std::string::npos) {
    // A JSON value if one parses from here, else a bare word.
    std::string tail = rest.substr(pos);
    nlohmann::json value;
    size_t used = 0;
    if (tail[0] == '{' || tail[0] == '[' || tail[0] == '"') {
      value = nlohmann::json::parse(tail, nullptr, false);
      used = tail.size();
    }
    if (value.is_discarded() || used == 0) {
      used = tail.find(' ');
      if (used == std::string::npos) used = tail.size();
      std::string word = tail.substr(0, used);
      auto parsed = nlohmann::json::parse(word, nullptr, false);
      value = parsed.is_discarded() ? nlohmann::json(word) : parsed;
    }
    args.push_back(value);
    pos = rest.find_first_not_of(' ', pos + used);
  }
  return {{"cmd", cmd}, {"args", args}, {"wait", nullptr}, {"check", nullptr}};
}

int interactive(ScriptWorld& world) {
  const bool tty = ::isatty(0) != 0;
  std::cout << "dugong-sim: node1 is the peer under test. Commands: addpeer [id], rmpeer id, bootstrap [p [s]],\n"
               "startPeer, peer, zk [true], catchUp, depose, rebuild id, freeze [bool], unfreeze, promote {..},\n"
               "setClusterState {..}, echo text; 'wait MS' advances time; every other command runs until rest.\n";
  std::string line;
  while (true) {
    if (tty) std::cout << "sim> " << std::flush;
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    if (line == "quit" || line == "exit") break;
    nlohmann::json step = parseInteractive(line);
    if (step.is_discarded()) {
      std::cout << "error: not valid JSON\n";
      continue;
    }
    if (step["cmd"] == "wait") {
      auto ms = step["args"].empty() ? nlohmann::json(1000) : step["args"][0];
      if (!ms.is_number_integer()) {
        std::cout << "error: wait MS\n";
        continue;
      }
      world.advance(ms.get<int64_t>());
      continue;
    }
    auto r = dugong::sim::runStep(step, world);
    if (!r) {
      std::cout << "error: " << r.error() << "\n";
    } else if (!r.value().is_null()) {
      std::cout << r.value().dump(2) << "\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dugong-sim: the peer state machine on a simulated ZooKeeper and postgres"};
  bool singleton = false;
  bool trace = false;
  std::vector<std::string> scripts;
  app.add_flag("--singleton", singleton, "configure the peer under test for one-node-write mode");
  app.add_flag("--trace", trace, "print every event, action and decision to stderr, with virtual time");
  app.add_option("scripts", scripts, "scenario scripts (JSON lines); none: an interactive prompt")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);

  if (scripts.empty()) {
    ScriptWorld world(ScriptWorld::Options{singleton});
    traceTo(world, trace);
    return interactive(world);
  }
  int failed = 0;
  for (const auto& path : scripts) {
    ScriptWorld world(ScriptWorld::Options{singleton});
    traceTo(world, trace);
    std::ifstream in(path);
    if (!dugong::sim::runScript(in, path, world, std::cout)) ++failed;
  }
  return failed == 0 ? 0 : 1;
}
