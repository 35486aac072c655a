#include "agent/logging.h"

#include <atomic>
#include <chrono>
#include <memory>

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "statemachine/time_format.h"

namespace dugong::agent {
namespace {

// 0: no cluster state seen yet (generations start at 1).
std::atomic<int64_t> gGeneration{0};

class JsonFormatter : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string peerId) : peerId_(std::move(peerId)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    const auto level = spdlog::level::to_string_view(msg.level);
    const int64_t generation = gGeneration.load(std::memory_order_relaxed);
    nlohmann::json j = {
        {"time", formatIso8601(ms)},
        {"level", std::string(level.data(), level.size())},
        {"logger", std::string(msg.logger_name.data(), msg.logger_name.size())},
        {"message", std::string(msg.payload.data(), msg.payload.size())},
        {"peer", peerId_},
        {"generation", generation > 0 ? nlohmann::json(generation) : nlohmann::json(nullptr)},
    };
    std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(peerId_); }

 private:
  std::string peerId_;
};

Result<spdlog::level::level_enum> parseLevel(const std::string& level) {
  auto l = spdlog::level::from_str(level);
  if (l == spdlog::level::off && level != "off") return Error{"unknown log level \"" + level + "\""};
  return l;
}

}  // namespace

Result<bool> setupLogging(const std::string& level, const std::string& format, const std::string& peerId) {
  auto l = parseLevel(level);
  if (!l) return Error{l.error()};
  auto logger = spdlog::stderr_color_mt("dugong");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>(peerId));
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

std::string logLevel() {
  const auto level = spdlog::get_level();
  if (level == spdlog::level::warn) return "warn";  // log.level's word, not spdlog's "warning"
  const auto name = spdlog::level::to_string_view(level);
  return std::string(name.data(), name.size());
}

void setLogGeneration(int64_t generation) { gGeneration.store(generation, std::memory_order_relaxed); }

}  // namespace dugong::agent
