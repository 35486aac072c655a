// dugong-cluster-sim: whole-cluster deterministic simulation with fault injection.
//
//   dugong-cluster-sim                      seeds 1..3000
//   dugong-cluster-sim --seeds 1..100000 --jobs 8
//   dugong-cluster-sim --seed 42 --trace full
//   dugong-cluster-sim --seed 42 --faults 3,7 --trace full   (a shrunk failure)
//
// The seed comes first in the output; seed + commit replay a run exactly. On a
// violation it prints the shrunk trace and the command that replays it. The last line
// is "N passed, M failed"; the exit status is 1 if any seed failed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/cluster/runner.h"

#ifndef DUGONG_SIM_COMMIT
#define DUGONG_SIM_COMMIT "unknown"
#endif

namespace {

using dugong::clustersim::RunResult;
using dugong::clustersim::Shrunk;
using dugong::clustersim::TraceLine;
using dugong::clustersim::WorldOptions;

struct Range {
  uint64_t first = 1;
  uint64_t last = 3000;
};

std::optional<Range> parseRange(const std::string& text) {
  auto dots = text.find("..");
  try {
    if (dots == std::string::npos) {
      uint64_t v = std::stoull(text);
      return Range{v, v};
    }
    Range r{std::stoull(text.substr(0, dots)), std::stoull(text.substr(dots + 2))};
    if (r.last < r.first) return std::nullopt;
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<std::set<int>> parseFaults(const std::string& text, bool& bad) {
  bad = false;
  if (text.empty() || text == "all") return std::nullopt;
  std::set<int> out;
  if (text == "none") return out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      out.insert(v);
    } catch (const std::exception&) {
      bad = true;
      return std::nullopt;
    }
  }
  return out;
}

struct Outcome {
  RunResult result;
  std::optional<Shrunk> shrunk;
};

void printTrace(const std::vector<TraceLine>& lines) {
  for (const auto& l : lines) std::cout << "  " << l.format() << "\n";
}

void printFailure(const Outcome& o, const std::optional<std::set<int>>& faults) {
  const RunResult& r = o.result;
  std::cout << "seed " << r.seed << " FAILED: " << r.violation->invariant << ": " << r.violation->detail << "\n";
  const RunResult& shown = o.shrunk ? o.shrunk->result : r;
  std::optional<std::set<int>> keep = faults;
  if (o.shrunk) {
    keep = o.shrunk->faults;
    std::cout << "  shrunk from " << r.faultsPlanned.size() << " faults to " << o.shrunk->faults.size() << " in "
              << o.shrunk->runs << " runs; the shrunk run fails with: " << shown.violation->invariant << ": "
              << shown.violation->detail << "\n";
  }
  std::cout << "  trace (faults, operator, ZooKeeper, postgres, decisions):\n";
  printTrace(dugong::clustersim::relevantTrace(shown.trace));
  std::cout << "  replay: " << dugong::clustersim::replayCommand(r.seed, keep) << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dugong-cluster-sim: every peer runs the real state machine over a simulated ZooKeeper and "
               "postgres, with seeded faults and invariant checks"};
  std::optional<uint64_t> seed;
  std::string seeds = "1..3000";
  std::string faultsText;
  std::string traceMode = "relevant";
  unsigned jobs = 1;
  bool noShrink = false;
  bool verbose = false;
  bool ackBeforeSync = false;
  bool dataOnly = false;
  app.add_option("--seed", seed, "Run one seed (and print its outcome)");
  app.add_option("--seeds", seeds, "Run a range of seeds, A..B inclusive")->capture_default_str();
  app.add_option("--faults", faultsText, "With --seed: run only these faults of the plan (comma list, or none)");
  app.add_option("--trace", traceMode, "With --seed: relevant (on failure), full (always), or none")
      ->check(CLI::IsMember({"relevant", "full", "none"}))
      ->capture_default_str();
  app.add_option("--jobs", jobs, "Seeds run in parallel")->check(CLI::Range(1u, 256u))->capture_default_str();
  app.add_flag("--no-shrink", noShrink, "Do not shrink failing runs");
  app.add_flag("-v,--verbose", verbose, "One line per seed");
  app.add_flag("--plant-async-ack", ackBeforeSync,
               "Self-test: the simulated primary acknowledges commits before its sync has them; the run must fail");
  app.add_flag("--data-invariants-only", dataOnly,
               "Do not check the takeover rules, only their consequences (lost commits, two writers, ...)");
  bool stopAtFirst = false;
  app.add_flag("--stop-at-first-failure", stopAtFirst,
               "Start no new seed after a failure (the smallest failing seed is still found)");
  CLI11_PARSE(app, argc, argv);

  bool badFaults = false;
  std::optional<std::set<int>> faults = parseFaults(faultsText, badFaults);
  if (badFaults) {
    std::cerr << "--faults: expected a comma-separated list of fault indices, \"none\" or \"all\"\n";
    return 2;
  }
  if (faults && !seed) {
    std::cerr << "--faults needs --seed\n";
    return 2;
  }
  std::optional<Range> range = seed ? Range{*seed, *seed} : parseRange(seeds);
  if (!range) {
    std::cerr << "--seeds: expected A..B with A <= B, e.g. 1..3000\n";
    return 2;
  }
  WorldOptions options;
  options.onlyFaults = faults;
  options.testingAckBeforeSync = ackBeforeSync;
  options.checkTakeoverRules = !dataOnly;
  // Seeds that pass unwatched keep no trace; a failing one is run again with it.
  options.trace = seed.has_value() || verbose;
  WorldOptions traced = options;
  traced.trace = true;

  if (seed) {
    std::cout << "seed " << *seed << " (commit " << DUGONG_SIM_COMMIT << ")" << std::endl;
  } else {
    std::cout << "seeds " << range->first << ".." << range->last << " (commit " << DUGONG_SIM_COMMIT << ", " << jobs
              << " jobs)" << std::endl;
  }

  const uint64_t count = range->last - range->first + 1;
  std::vector<std::optional<Outcome>> failures(count);
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> ran{0};
  std::atomic<int64_t> acks{0};
  std::atomic<int64_t> faultsRun{0};
  std::vector<std::atomic<int64_t>> byKind(dugong::clustersim::kFaultKinds);
  std::atomic<int64_t> virtualMs{0};
  std::atomic<int64_t> worstConverge{0};
  std::atomic<int64_t> leftToAnOperator{0};
  std::mutex printMutex;
  auto started = std::chrono::steady_clock::now();

  auto worker = [&] {
    for (uint64_t i = next++; i < count; i = next++) {
      uint64_t s = range->first + i;
      RunResult r = dugong::clustersim::runSeed(s, options);
      ++ran;
      acks += r.acks;
      faultsRun += r.faultsRun;
      for (size_t k = 0; k < r.faultsRunByKind.size(); ++k) byKind[k] += r.faultsRunByKind[k];
      virtualMs += r.virtualMs;
      if (r.leftToAnOperator) ++leftToAnOperator;
      if (r.convergedAfterMs) {
        int64_t prev = worstConverge.load();
        while (*r.convergedAfterMs > prev && !worstConverge.compare_exchange_weak(prev, *r.convergedAfterMs)) {
        }
      }
      if (verbose) {
        std::lock_guard lock(printMutex);
        std::cout << "seed " << s << ": " << (r.ok ? "ok" : "FAILED " + r.violation->invariant) << ", "
                  << r.generations << " generations, " << r.acks << " acks, " << r.faultsRun << " faults, "
                  << (r.convergedAfterMs    ? "read-write " + std::to_string(*r.convergedAfterMs) + " ms after the faults"
                      : r.leftToAnOperator ? "left to an operator: " + *r.leftToAnOperator
                                           : std::string("not converged"))
                  << ", trace hash " << std::hex << r.traceHash << std::dec << std::endl;
      }
      if (seed && traceMode == "full") {
        std::lock_guard lock(printMutex);
        printTrace(r.trace);
      }
      if (r.ok) continue;
      ++failed;
      if (stopAtFirst) next = count;
      if (!options.trace) r = dugong::clustersim::runSeed(s, traced);
      Outcome o;
      if (!noShrink && !faults) {
        o.shrunk = dugong::clustersim::shrink(s, r, traced);
      }
      o.result = std::move(r);
      failures[i] = std::move(o);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  for (const auto& f : failures) {
    if (f) printFailure(*f, faults);
  }
  uint64_t nFailed = failed.load();
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f", seconds > 0 ? static_cast<double>(ran.load()) / seconds : 0.0);
  std::cout << "seeds: " << (ran.load() - nFailed) << " passed, " << nFailed << " failed (" << rate << " seeds/s on "
            << jobs << " jobs; " << acks.load() << " acknowledged commits, " << faultsRun.load() << " faults, "
            << virtualMs.load() / 1000 << " virtual s; slowest return to read-write " << worstConverge.load()
            << " ms after the faults stopped; " << leftToAnOperator.load()
            << " left to an operator, their primary halted on data a fault replaced by an older copy)\n";
  std::cout << "fault mix:";
  for (int k = 0; k < dugong::clustersim::kFaultKinds; ++k) {
    std::cout << " " << dugong::clustersim::faultName(static_cast<dugong::clustersim::FaultKind>(k)) << " "
              << byKind[static_cast<size_t>(k)].load();
  }
  std::cout << "\n";
  std::cout << (ran.load() - nFailed) << " passed, " << nFailed << " failed" << std::endl;
  return nFailed == 0 ? 0 : 1;
}
