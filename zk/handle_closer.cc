#include "zk/handle_closer.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

namespace dugong::zk::detail {
namespace {

struct Job {
  zhandle_t* zh = nullptr;
  CloseMode mode = CloseMode::kEndSession;
  std::shared_ptr<void> keepAlive;
};

class Closer {
 public:
  static Closer& instance() {
    static Closer closer;
    return closer;
  }

  ~Closer() {
    {
      std::lock_guard lock(mu_);
      exiting_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void add(Job job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
      ++queued_;
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    }
    wake_.notify_all();
  }

  bool wait(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return done_.wait_for(lock, timeout, [this] { return closed_ == queued_; });
  }

  void setHook(std::function<void()> hook) {
    std::lock_guard lock(mu_);
    hook_ = std::move(hook);
  }

 private:
  Closer() = default;

  void run() {
    for (;;) {
      Job job;
      std::function<void()> hook;
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [this] { return exiting_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // exiting, and nothing left
        job = std::move(jobs_.front());
        jobs_.pop_front();
        hook = hook_;
      }
      if (hook && job.mode == CloseMode::kEndSession) hook();
      if (!close(job)) {
        // Left open: its threads may still call back into what keepAlive holds.
        new std::shared_ptr<void>(std::move(job.keepAlive));  // NOLINT: deliberately never freed
      }
      job.keepAlive.reset();
      {
        std::lock_guard lock(mu_);
        ++closed_;
      }
      done_.notify_all();
    }
  }

  // False when the handle was left open.
  static bool close(const Job& job) {
    if (job.mode == CloseMode::kKeepSession) return false;
    int rc = zookeeper_close(job.zh);
    if (rc != ZOK) spdlog::warn("zk: closing a handle: {}", describeRc(rc));
    return true;
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::deque<Job> jobs_;
  uint64_t queued_ = 0;
  uint64_t closed_ = 0;
  bool exiting_ = false;
  std::function<void()> hook_;
  std::thread thread_;
};

}  // namespace

void closeLater(zhandle_t* zh, CloseMode mode, std::shared_ptr<void> keepAlive) {
  Closer::instance().add(Job{zh, mode, std::move(keepAlive)});
}

bool waitForClosedHandles(std::chrono::milliseconds timeout) { return Closer::instance().wait(timeout); }

void setBeforeCloseHookForTest(std::function<void()> hook) { Closer::instance().setHook(std::move(hook)); }

}  // namespace dugong::zk::detail
