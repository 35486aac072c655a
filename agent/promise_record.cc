#include "agent/promise_record.h"
#include "agent/suspend_clock.h"

#include "agent/durable_file.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "driver/failsafe.h"

namespace dugong::agent {

BootClock BootClock::now() {
  BootClock c;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, c.bootId);
  c.ms = bootTimeMs();
  return c;
}

Result<bool> PromiseRecord::save(int64_t remainingMs, const BootClock& now) const {
  const nlohmann::json j = {{"bootId", now.bootId},
                            {"recordedAtMs", now.ms},
                            {"promisedUntilMs", now.ms + std::max<int64_t>(remainingMs, 0)}};
  return writeFileDurably(path_, j.dump(2) + "\n");
}

Result<std::optional<int64_t>> PromiseRecord::remainingAt(const BootClock& now) const {
  std::ifstream in(path_);
  if (!in) {
    if (errno == ENOENT) return std::optional<int64_t>{};
    return fileError("cannot read", path_);
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const auto j = nlohmann::json::parse(buf.str(), nullptr, false);
  if (!j.is_object() || !j.contains("bootId") || !j["bootId"].is_string() || !j.contains("recordedAtMs") ||
      !j["recordedAtMs"].is_number_integer() || !j.contains("promisedUntilMs") ||
      !j["promisedUntilMs"].is_number_integer()) {
    return Error{path_ + " is not a dugong promise record (bootId, recordedAtMs, promisedUntilMs)"};
  }
  const int64_t until = j["promisedUntilMs"].get<int64_t>();
  // Another boot: the time since is unknown, but not negative.
  const int64_t from = j["bootId"].get<std::string>() == now.bootId ? now.ms : j["recordedAtMs"].get<int64_t>();
  return std::optional<int64_t>{std::clamp<int64_t>(until - from, 0, driver::kFailsafeMaxDurationMs)};
}

}  // namespace dugong::agent
