// dugong: the HA agent that runs beside one postgres instance.
//
//   dugong --config /etc/dugong/dugong.yaml [--log-format json] [--check | --leave]
//   dugong --version
//
// SIGTERM / SIGINT: stop this run of the agent, keeping its ZooKeeper session for a
// restart (postgres keeps running unless shutdown.stopPostgres is set): its peers see
// no change if it is back within the session timeout, and react as to a failure
// otherwise. SIGHUP: re-read log.level from the config file.
// --leave (agent stopped): end the kept session now, so the peers replace this peer at
// once; the way to stop a peer for good.
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <iostream>
#include <string>

#include <malloc.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/leave_command.h"
#include "agent/logging.h"
#include "dugong/version.h"
#include "pg/sql.h"

namespace {

// SIGHUP: the new log.level from the file. The line saying so is written at info while
// the more verbose of the two levels is in force, so that it is seen when either shows info.
void reloadLogLevel(const std::string& configPath) {
  auto fresh = dugong::agent::loadConfig(configPath);
  if (!fresh) {
    spdlog::error("SIGHUP: not reloading the log level, the configuration is invalid: {}", fresh.error());
    return;
  }
  const std::string before = dugong::agent::logLevel();
  const std::string line = "SIGHUP: log level " + fresh->logLevel + " (was " + before + ")";
  const bool shownBefore = spdlog::should_log(spdlog::level::info);
  if (shownBefore) spdlog::info("{}", line);
  if (auto ok = dugong::agent::setLogLevel(fresh->logLevel); !ok) {
    spdlog::error("SIGHUP: {}", ok.error());
    return;
  }
  if (!shownBefore) spdlog::info("{}", line);
}

// GnuTLS is linked only through libpq -> libldap (LDAP lookups of connection services)
// and initialises itself in a library constructor, before main: about 0.8 MB resident
// (gnutls, and its heap) in an agent that never uses it. GNUTLS_NO_IMPLICIT_INIT=1
// skips that, and libldap calls gnutls_global_init() itself before any TLS of its own.
// Constructors read the environment before main runs, so the agent sets the variable
// and executes itself again (same pid, same arguments), once; the second run removes
// it, so that postgres, the hooks and every other program the agent starts get the
// environment it was given. A variable the operator set is left as it is; a failed exec
// goes on as before.
void withoutGnutlsImplicitInit(char** argv) {
  constexpr const char* kVariable = "GNUTLS_NO_IMPLICIT_INIT";
  constexpr const char* kMark = "DUGONG_GNUTLS_REEXECUTED";
  if (std::getenv(kMark) != nullptr) {
    ::unsetenv(kMark);
    ::unsetenv(kVariable);
    return;
  }
  if (std::getenv(kVariable) != nullptr) return;
  if (::setenv(kVariable, "1", 1) != 0 || ::setenv(kMark, "1", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv(kMark);
  ::unsetenv(kVariable);
}

}  // namespace

int main(int argc, char** argv) {
  // `dugong --scram-verifier CONNINFO USER TIMEOUT_MS`: the agent's helper that makes a
  // SCRAM verifier in a process of its own (pg::setVerifierHelper).
  if (argc == 5 && std::string(argv[1]) == "--scram-verifier") {
    return dugong::pg::runVerifierHelper(argv[2], argv[3], argv[4]);
  }
  withoutGnutlsImplicitInit(argv);
  // One malloc arena for the agent's few threads (the loop, the adapter's workers, the
  // hooks' worker, ZooKeeper's): each further arena keeps pages of its own resident
  // (0.1-0.3 MB at rest, measured), and at rest nothing contends for the lock. Before
  // any thread; MALLOC_ARENA_MAX, when set, decides.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) ::mallopt(M_ARENA_MAX, 1);
  CLI::App app{"dugong: PostgreSQL high-availability agent coordinated by ZooKeeper"};
  app.set_version_flag("--version", std::string("dugong ") + dugong::kVersion, "print the version and exit");
  std::string configPath;
  std::string logFormat;
  std::string logLevel;
  bool checkOnly = false;
  bool leave = false;
  app.add_option("-c,--config", configPath, "the agent's YAML configuration file")->required();
  app.add_option("--log-format", logFormat, "text or json (overrides log.format)")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", logLevel, "trace, debug, info, warn or error (overrides log.level)");
  app.add_flag("--check", checkOnly, "validate the configuration, print the peer identity and exit");
  app.add_flag("--leave", leave,
               "stop this peer for good: with its agent stopped, end the ZooKeeper session it kept for a restart, "
               "so that its peers replace it now");
  CLI11_PARSE(app, argc, argv);

  auto config = dugong::agent::loadConfig(configPath);
  if (!config) {
    std::cerr << "dugong: " << config.error() << "\n";
    return 2;
  }
  if (!logFormat.empty()) config.value().logFormat = logFormat;
  if (!logLevel.empty()) config.value().logLevel = logLevel;
  if (auto ok = dugong::agent::setupLogging(config->logLevel, config->logFormat, config->identity.id); !ok) {
    std::cerr << "dugong: " << ok.error() << "\n";
    return 2;
  }
  if (leave) return dugong::agent::leaveCluster(config.value(), std::cout, std::cerr);
  if (checkOnly) {
    for (const auto& w : config->warnings) std::cerr << "dugong: warning: " << w << "\n";
    std::cout << config->identity.toJson().dump(2) << "\n";
    return 0;
  }
  for (const auto& w : config->warnings) spdlog::warn("configuration: {}", w);

  // Before any thread: a forked child must not inherit locks held by others.
  auto watchdog = dugong::agent::Watchdog::start(
      config->pg.dataDir, std::chrono::milliseconds(config->zk.sessionTimeoutMs / 2), config->sessionFile);
  if (!watchdog) {
    spdlog::critical("cannot start: {}", watchdog.error());
    return 1;
  }
  // The verifiers of the bootstrap's passwords are made by this executable run as a
  // helper: SCRAM would otherwise leave about 2 MB of OpenSSL resident in the agent.
  dugong::pg::setVerifierHelper("/proc/self/exe");
  boost::asio::io_context io;
  dugong::agent::Agent agent(io, config.value());
  agent.setWatchdog(std::move(watchdog).value());
  bool stopping = false;
  boost::asio::steady_timer stopDeadline(io);
  auto shutdown = [&] {
    if (stopping) return;
    stopping = true;
    agent.stop([&io] { io.stop(); });
    stopDeadline.expires_after(std::chrono::seconds(90));
    stopDeadline.async_wait([&io](const boost::system::error_code& ec) {
      if (ec) return;
      spdlog::error("stopping took more than 90 s; exiting anyway");
      io.stop();
    });
  };
  agent.onFatal(shutdown);

  boost::asio::signal_set stopSignals(io, SIGTERM, SIGINT);
  stopSignals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    spdlog::info("received {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    shutdown();
  });
  boost::asio::signal_set hup(io, SIGHUP);
  std::function<void()> waitHup = [&] {
    hup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      reloadLogLevel(configPath);
      waitHup();
    });
  };
  waitHup();
  std::signal(SIGPIPE, SIG_IGN);

  // Free heap pages back to the kernel now and then (malloc_trim: the arena's free
  // pages, not only its top): an apply or a rejoin allocates in bursts.
  boost::asio::steady_timer trimTimer(io);
  std::function<void()> trimLater = [&] {
    trimTimer.expires_after(std::chrono::seconds(10));
    trimTimer.async_wait([&](const boost::system::error_code& ec) {
      if (ec || stopping) return;
      ::malloc_trim(0);
      trimLater();
    });
  };
  trimLater();
  if (auto ok = agent.start(); !ok) {
    spdlog::critical("cannot start: {}", ok.error());
    return 1;
  }
  io.run();
  agent.loopEnded();
  const int code = agent.exitCode();
  if (agent.sessionDetached()) {
    // The kept session's handle stays open until the process is gone; nothing may close
    // it (that would end the session), so skip every destructor.
    spdlog::info("stopped; the ZooKeeper session is kept for a restart");
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    std::_Exit(code);
  }
  dugong::zk::waitForClosedSessions(std::chrono::seconds(10));
  spdlog::info("stopped");
  return code;
}
