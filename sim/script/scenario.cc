#include "sim/script/scenario.h"

#include <istream>
#include <ostream>

namespace dugong::sim {

std::optional<std::string> findMismatch(const nlohmann::json& expected, const nlohmann::json& actual,
                                        const std::string& path) {
  if (expected.is_object()) {
    if (!actual.is_object()) return path.empty() ? "(top)" : path;
    for (const auto& [key, value] : expected.items()) {
      auto it = actual.find(key);
      const nlohmann::json missing;  // null stands for an absent key only when null is expected
      if (it == actual.end() && !value.is_null()) return path + "." + key;
      if (auto m = findMismatch(value, it == actual.end() ? missing : *it, path + "." + key)) return m;
    }
    return std::nullopt;
  }
  if (expected.is_array()) {
    if (!actual.is_array() || actual.size() < expected.size()) return path.empty() ? "(top)" : path;
    for (size_t i = 0; i < expected.size(); ++i) {
      if (auto m = findMismatch(expected[i], actual[i], path + "[" + std::to_string(i) + "]")) return m;
    }
    return std::nullopt;
  }
  if (expected != actual) return path.empty() ? "(top)" : path;
  return std::nullopt;
}

namespace {

const nlohmann::json& at(const nlohmann::json& j, const std::string& path) {
  // Walks ".a.b[2]" paths produced by findMismatch; returns null when it cannot.
  static const nlohmann::json kNull;
  const nlohmann::json* cur = &j;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') {
      size_t end = path.find_first_of(".[", i + 1);
      std::string key = path.substr(i + 1, end == std::string::npos ? std::string::npos : end - i - 1);
      if (!cur->is_object() || !cur->contains(key)) return kNull;
      cur = &(*cur)[key];
      i = end == std::string::npos ? path.size() : end;
    } else if (path[i] == '[') {
      size_t end = path.find(']', i);
      size_t idx = std::stoul(path.substr(i + 1, end - i - 1));
      if (!cur->is_array() || idx >= cur->size()) return kNull;
      cur = &(*cur)[idx];
      i = end + 1;
    } else {
      return *cur;  // "(top)"
    }
  }
  return *cur;
}

}  // namespace

Result<nlohmann::json> runStep(const nlohmann::json& step, ScriptWorld& world) {
  if (!step.is_object() || !step.contains("cmd") || !step["cmd"].is_string()) {
    return Error{"a step must be an object with a string \"cmd\""};
  }
  const nlohmann::json args = step.value("args", nlohmann::json::array());
  const nlohmann::json wait = step.value("wait", nlohmann::json(nullptr));
  const nlohmann::json check = step.value("check", nlohmann::json(nullptr));
  if (!wait.is_null() && (!wait.is_number_integer() || wait.get<int64_t>() < 0)) {
    return Error{"\"wait\" must be null or a whole number of ms"};
  }
  auto result = world.run(step["cmd"].get<std::string>(), args);
  if (!result) return Error{"command failed: " + result.error()};
  if (!check.is_null()) {
    if (auto path = findMismatch(check, result.value())) {
      return Error{"check failed at " + *path + "\n  expected: " + at(check, *path).dump() +
                   "\n  actual:   " + at(result.value(), *path).dump() + "\n  expected (whole): " + check.dump() +
                   "\n  actual (whole):   " + result.value().dump()};
    }
  }
  if (wait.is_null()) {
    if (!world.runUntilRest(kRestLimitMs)) {
      return Error{"the world did not come to rest within " + std::to_string(kRestLimitMs) + " virtual ms"};
    }
  } else {
    world.advance(wait.get<int64_t>());
  }
  return result;
}

bool runScript(std::istream& script, const std::string& name, ScriptWorld& world, std::ostream& out) {
  std::string line;
  int lineNo = 0;
  int steps = 0;
  while (std::getline(script, line)) {
    ++lineNo;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    auto step = nlohmann::json::parse(line, nullptr, false);
    if (step.is_discarded()) {
      out << name << ":" << lineNo << ": not a JSON object: " << line << "\n";
      return false;
    }
    if (step.value("cmd", "") == "echo") {
      std::string text;
      for (const auto& a : step.value("args", nlohmann::json::array())) {
        text += a.is_string() ? a.get<std::string>() : a.dump();
      }
      out << "# " << text << "\n";
    }
    ++steps;
    auto r = runStep(step, world);
    if (!r) {
      out << name << ":" << lineNo << ": step " << steps << " " << line << "\n  " << r.error() << "\n";
      return false;
    }
  }
  out << name << ": " << steps << " steps passed\n";
  return true;
}

}  // namespace dugong::sim
