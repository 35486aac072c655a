// What the commands share: connecting with the common options, asking for confirmation.
#include "tools/adm/commands.h"

#include <unistd.h>

#include <iostream>

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

}  // namespace dugong::adm
