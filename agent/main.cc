// dugong: the HA agent that runs beside one postgres instance.
//
//   dugong --config /etc/dugong/dugong.yaml [--log-format json] [--check]
//
// SIGTERM / SIGINT: leave ZooKeeper and exit (postgres keeps running unless
// shutdown.stopPostgres is set). SIGHUP: re-read log.level from the config file.
#include <csignal>
#include <iostream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"dugong: PostgreSQL high-availability agent coordinated by ZooKeeper"};
  std::string configPath;
  std::string logFormat;
  std::string logLevel;
  bool checkOnly = false;
  app.add_option("-c,--config", configPath, "the agent's YAML configuration file")->required();
  app.add_option("--log-format", logFormat, "text or json (overrides log.format)")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", logLevel, "trace, debug, info, warn or error (overrides log.level)");
  app.add_flag("--check", checkOnly, "validate the configuration, print the peer identity and exit");
  CLI11_PARSE(app, argc, argv);

  auto config = dugong::agent::loadConfig(configPath);
  if (!config) {
    std::cerr << "dugong: " << config.error() << "\n";
    return 2;
  }
  if (!logFormat.empty()) config.value().logFormat = logFormat;
  if (!logLevel.empty()) config.value().logLevel = logLevel;
  if (auto ok = dugong::agent::setupLogging(config->logLevel, config->logFormat); !ok) {
    std::cerr << "dugong: " << ok.error() << "\n";
    return 2;
  }
  if (checkOnly) {
    for (const auto& w : config->warnings) std::cerr << "dugong: warning: " << w << "\n";
    std::cout << config->identity.toJson().dump(2) << "\n";
    return 0;
  }
  for (const auto& w : config->warnings) spdlog::warn("configuration: {}", w);

  boost::asio::io_context io;
  dugong::agent::Agent agent(io, config.value());
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
      auto fresh = dugong::agent::loadConfig(configPath);
      if (!fresh) {
        spdlog::error("SIGHUP: not reloading the log level: {}", fresh.error());
      } else if (auto ok = dugong::agent::setLogLevel(fresh->logLevel); ok) {
        spdlog::info("SIGHUP: log level is now {}", fresh->logLevel);
      }
      waitHup();
    });
  };
  waitHup();
  std::signal(SIGPIPE, SIG_IGN);

  if (auto ok = agent.start(); !ok) {
    spdlog::critical("cannot start: {}", ok.error());
    return 1;
  }
  io.run();
  spdlog::info("stopped");
  return agent.exitCode();
}
