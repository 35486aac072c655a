#include "pg/testing/initdb_template.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>
#include <system_error>

#include "tests/support/test_env.h"

namespace dugong::pg::testing {

namespace {

namespace fs = std::filesystem;

// The `initdb` of the agents' bin directory: the real one once per argument list (the data
// directory aside) and initdb version, under a lock, into a template; then a copy of it.
std::string initdbFromTemplateScript(const std::string& realInitdb, const std::string& templates) {
  return "#!/bin/bash\n"
         "# Written by the tests' harness (pg/testing/initdb_template.h): the real initdb\n"
         "# once per argument list into a template, then a copy of the template.\n"
         "set -euo pipefail\n"
         "real='" + realInitdb + "'\n"
         "templates='" + templates + "'\n"
         "data=\n"
         "key=$(\"$real\" --version)\n"
         "rest=()\n"
         "while (($#)); do\n"
         "  if [[ $1 == -D && $# -ge 2 ]]; then data=$2; shift 2; else key+=\" $1\"; rest+=(\"$1\"); shift; fi\n"
         "done\n"
         "[[ -n $data ]] || exec \"$real\" \"${rest[@]}\"\n"
         "template=$templates/$(md5sum <<<\"$key\" | cut -c1-16)\n"
         "exec 9>\"$template.lock\"\n"
         "flock 9\n"
         "if [[ ! -d $template ]]; then\n"
         "  rm -rf \"$template.partial\"\n"
         "  \"$real\" -D \"$template.partial\" \"${rest[@]}\" --no-sync\n"
         "  mv \"$template.partial\" \"$template\"\n"
         "fi\n"
         "flock -u 9\n"
         "mkdir -p \"$data\"\n"
         "chmod 700 \"$data\"\n"
         "cp -a \"$template/.\" \"$data/\"\n"
         "echo \"initdb: $data copied from the template $template, made by $real with the same arguments\"\n";
}

// A program of the bin directory that runs the real one with its arguments and --no-sync
// (last: `--version` is only read as the first argument).
std::string noSyncScript(const std::string& real) {
  return "#!/bin/bash\n"
         "# Written by the tests' harness (pg/testing/initdb_template.h): the real program,\n"
         "# without its fsync of the files it wrote (no test crashes the host).\n"
         "exec '" + real + "' \"$@\" --no-sync\n";
}

}  // namespace

std::string testBinDir(const std::string& realBinDir, Initdb initdb) {
  const char* fixtures = std::getenv(dugong::testing::kClusterFixturesVariable);
  if (fixtures == nullptr || *fixtures == '\0') return realBinDir;
  const std::string templates = std::string(fixtures) + "/initdb";
  // The agents run initdb as the postgres user: the directory is everybody's (sticky).
  fs::create_directories(templates);
  ::chmod(templates.c_str(), 01777);
  const std::map<std::string, std::string> scripts = {
      {"initdb", initdb == Initdb::kFromTemplate ? initdbFromTemplateScript(realBinDir + "/initdb", templates)
                                                  : noSyncScript(realBinDir + "/initdb")},
      {"pg_basebackup", noSyncScript(realBinDir + "/pg_basebackup")},
  };
  std::string all = realBinDir;
  for (const auto& [program, text] : scripts) all += "\n" + program + "\n" + text;
  const std::string bin = templates + "/bin-" + std::to_string(std::hash<std::string>{}(all));
  if (fs::is_directory(bin)) return bin;
  // Made aside and renamed: another test process may make the same at the same time.
  const std::string partial = bin + ".partial-" + std::to_string(::getpid());
  fs::remove_all(partial);
  fs::create_directories(partial);
  for (const auto& entry : fs::directory_iterator(realBinDir)) {
    const std::string program = entry.path().filename().string();
    if (!scripts.count(program)) fs::create_symlink(entry.path(), partial + "/" + program);
  }
  for (const auto& [program, text] : scripts) {
    const std::string script = partial + "/" + program;
    std::ofstream(script) << text;
    ::chmod(script.c_str(), 0755);
  }
  ::chmod(partial.c_str(), 0755);
  std::error_code ec;
  fs::rename(partial, bin, ec);
  if (ec) fs::remove_all(partial);  // the other process' directory won
  if (!fs::is_directory(bin)) throw std::runtime_error("tests: cannot make the agents' bin directory " + bin);
  return bin;
}

}  // namespace dugong::pg::testing
