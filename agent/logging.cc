#include "agent/logging.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <deque>
#include <memory>

#include <nlohmann/json.hpp>
#include <spdlog/formatter.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "statemachine/time_format.h"

namespace dugong::agent {
namespace {

// 0: no cluster state seen yet (generations start at 1).
std::atomic<int64_t> gGeneration{0};

constexpr const char* kTextPattern = "%Y-%m-%dT%H:%M:%S.%e%z %^%-5l%$ %v";
// As set up (setupLogging), for the watchdog's own sink.
std::string gFormat = "text";
std::string gPeerId;

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

// stderr without ever blocking: a socket (journald's stream) is written with
// MSG_DONTWAIT; a pipe through a description of its own opened non-blocking (the
// agent's, shared until then, stays blocking); anything else (a file, a terminal) as it is.
class NonBlockingStderrSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  NonBlockingStderrSink() {
    struct stat st {};
    if (::fstat(2, &st) != 0) return;
    socket_ = S_ISSOCK(st.st_mode);
    if (S_ISFIFO(st.st_mode)) {
      const int fd = ::open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) fd_ = fd;
    }
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    if (pending_.size() >= kMaxPending) pending_.pop_front();
    pending_.emplace_back(buf.data(), buf.size());
    flush_();
  }
  void flush_() override {
    while (!pending_.empty()) {
      std::string& line = pending_.front();
      const ssize_t n = socket_ ? ::send(fd_, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL)
                                : ::write(fd_, line.data(), line.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // full: the next flush
      if (n >= 0 && static_cast<size_t>(n) < line.size()) {
        line.erase(0, static_cast<size_t>(n));
        continue;
      }
      pending_.pop_front();  // written, or an error no retry mends
    }
  }

 private:
  static constexpr size_t kMaxPending = 16;
  int fd_ = 2;
  bool socket_ = false;
  std::deque<std::string> pending_;
};

}  // namespace

void logWithoutBlocking() {
  auto logger = spdlog::default_logger();
  auto sink = std::make_shared<NonBlockingStderrSink>();
  if (gFormat == "json") {
    sink->set_formatter(std::make_unique<JsonFormatter>(gPeerId));
  } else {
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(kTextPattern));
  }
  logger->sinks().clear();
  logger->sinks().push_back(std::move(sink));
}

Result<bool> setupLogging(const std::string& level, const std::string& format, const std::string& peerId) {
  auto l = parseLevel(level);
  if (!l) return Error{l.error()};
  auto logger = spdlog::stderr_color_mt("dugong");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>(peerId));
  } else if (format == "text") {
    logger->set_pattern(kTextPattern);
  } else {
    return Error{"unknown log format \"" + format + "\" (text or json)"};
  }
  gFormat = format;
  gPeerId = peerId;
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
