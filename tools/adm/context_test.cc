#include "tools/adm/context.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace dugong::adm {
namespace {

// Restores an environment variable when the test ends.
class EnvRestore {
 public:
  explicit EnvRestore(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) value_ = v;
  }
  ~EnvRestore() {
    if (value_) {
      ::setenv(name_, value_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  EnvRestore(const EnvRestore&) = delete;
  EnvRestore& operator=(const EnvRestore&) = delete;

 private:
  const char* name_;
  std::optional<std::string> value_;
};

// The audit trail names the user who ran the command, also from cron, runuser or a
// root shell that set no $USER (operator review P9: "by ?@host").
TEST(OperatorReason, NamesTheUserRunningTheCommandWhenUSERIsNotSet) {
  EnvRestore keep("USER");
  ::unsetenv("USER");
  const passwd* pw = ::getpwuid(::getuid());
  ASSERT_NE(pw, nullptr);
  const std::string reason = operatorReason("freeze");
  EXPECT_EQ(reason.rfind("dugong-adm freeze (by " + std::string(pw->pw_name) + "@", 0), 0u) << reason;
}

// The user the operating system says runs it, whatever $USER claims.
TEST(OperatorReason, TrustsTheUserIdNotTheEnvironment) {
  EnvRestore keep("USER");
  ::setenv("USER", "someone-else", 1);
  const passwd* pw = ::getpwuid(::getuid());
  ASSERT_NE(pw, nullptr);
  const std::string reason = operatorReason("freeze");
  EXPECT_NE(reason.find("(by " + std::string(pw->pw_name) + "@"), std::string::npos) << reason;
}

}  // namespace
}  // namespace dugong::adm
