// POST /switchover carried out: the candidate becomes the primary through the promote
// requests `dugong-adm switchover` writes, one step at a time (ops/switchover_flow.h:
// an async moves up the chain to async[0], then becomes the sync, then the sync takes
// over); a refusal of the first step changes nothing.
//
// It runs on a thread of its own, with its own ZooKeeper client, because it waits for
// the peers (its own agent included, over HTTP) and must never block the agent's loop.
// One at a time.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "agent/http_server.h"
#include "ops/switchover_plan.h"
#include "zk/options.h"

namespace dugong::agent {

class Switchover {
 public:
  // `self`: this agent's peer id, named in the history records it writes.
  Switchover(zk::ZkOptions zk, std::string self) : zk_(std::move(zk)), self_(std::move(self)) {}
  ~Switchover() {
    cancel();
    if (worker_.joinable()) worker_.join();
  }
  Switchover(const Switchover&) = delete;
  Switchover& operator=(const Switchover&) = delete;

  // Starts moving the primary to the candidate asked for (the sync when none is named)
  // and calls `respond` once, from the worker thread: 200 when it is the writable
  // primary, 4xx when the first step is refused (404 unknown candidate, 409 not possible
  // now, 412 `leader` is not the primary), 503 when a later step fails. Returns false
  // (and does not call `respond`) while another switchover runs.
  bool start(const adm::SwitchoverAsk& ask, HttpServer::Respond respond);
  // Makes a running switchover stop waiting, without waiting for it (the worker ends
  // within its current bounded call; a request already written stays until carried out
  // or expired). The destructor joins it.
  void cancel() { stopping_ = true; }

 private:
  HttpReply run(const adm::SwitchoverAsk& ask);

  zk::ZkOptions zk_;
  std::string self_;
  std::thread worker_;
  std::atomic<bool> running_{false};
  std::atomic<bool> stopping_{false};
};

}  // namespace dugong::agent
