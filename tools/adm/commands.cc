// What the commands share: connecting with the common options, asking for confirmation.
#include "tools/adm/commands.h"

#include <unistd.h>

#include <iostream>
#include <thread>

#include "statemachine/time_format.h"

namespace dugong::adm {

std::unique_ptr<zk::Client> connectOrFail(const CommonOptions& common, int& code) {
  auto o = zkOptionsFrom(common);
  if (!o) {
    code = fail(kExitUsage, o.error());
    return nullptr;
  }
  auto c = connectZk(*o, std::chrono::seconds(common.timeoutSeconds));
  if (!c) {
    code = fail(kExitUnavailable, c.error());
    return nullptr;
  }
  return std::move(c).value();
}

bool confirm(const std::string& question, const std::string& flag) {
  if (!isatty(STDIN_FILENO)) {
    std::cerr << "dugong-adm: refusing: this needs confirmation and there is no terminal to ask; pass " << flag
              << " to confirm\n";
    return false;
  }
  std::cerr << question << " [y/N] " << std::flush;
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes";
}

void addScheduledOption(CLI::App* sub, std::string& text) {
  sub->add_option("--scheduled", text,
                  "when: an ISO 8601 time with its zone (2026-11-29T22:00:00Z), at most 7 days ahead; the command "
                  "checks now, waits in the foreground and checks again then");
}

void waitUntilScheduled(EpochMs at, const std::string& what) {
  const EpochMs now = nowMs();
  const int64_t seconds = (at - now + 999) / 1000;
  const std::string in = seconds < 60     ? std::to_string(seconds) + " s"
                         : seconds < 3600 ? std::to_string(seconds / 60) + " min " + std::to_string(seconds % 60) + " s"
                                          : std::to_string(seconds / 3600) + " h " +
                                                std::to_string(seconds % 3600 / 60) + " min";
  std::cout << "waiting until " << formatIso8601(at) << " (in " << in << "; it is now " << formatIso8601(now)
            << ") to " << what
            << "; nothing is changed before then (interrupt to cancel)\n"
            << std::flush;
  // Wall-clock time, read again each second: the time asked for is a wall-clock time.
  while (nowMs() < at) std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(1000, at - nowMs())));
  std::cout << "it is " << formatIso8601(nowMs()) << ": " << what << "\n" << std::flush;
}

}  // namespace dugong::adm
