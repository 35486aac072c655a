#include "agent/logging.h"

#include <chrono>
#include <ctime>
#include <memory>

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "statemachine/time_format.h"

namespace dugong::agent {
namespace {

class JsonFormatter : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    nlohmann::json j = {
        {"time", formatIso8601(ms)},
        {"level", std::string(spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size())},
        {"logger", std::string(msg.logger_name.data(), msg.logger_name.size())},
        {"msg", std::string(msg.payload.data(), msg.payload.size())},
    };
    std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

Result<spdlog::level::level_enum> parseLevel(const std::string& level) {
  auto l = spdlog::level::from_str(level);
  if (l == spdlog::level::off && level != "off") return Error{"unknown log level \"" + level + "\""};
  return l;
}

}  // namespace

Result<bool> setupLogging(const std::string& level, const std::string& format) {
  auto l = parseLevel(level);
  if (!l) return Error{l.error()};
  auto logger = spdlog::stderr_color_mt("dugong");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else if (format == "text") {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%-5l%$ %v");
  } else {
    return Error{"unknown log format \"" + format + "\" (text or json)"};
  }
  logger->set_level(l.value());
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return true;
}

Result<bool> setLogLevel(const std::string& level) {
  auto l = parseLevel(level);
  if (!l) return Error{l.error()};
  spdlog::set_level(l.value());
  return true;
}

}  // namespace dugong::agent
