#include "pg/connection_pool.h"

#include <utility>

namespace dugong::pg {

ConnectionPool::ConnectionPool(std::string conninfo, std::chrono::milliseconds timeout, size_t keep)
    : conninfo_(std::move(conninfo)), timeout_(timeout), keep_(keep) {}

std::unique_ptr<Connection> ConnectionPool::take() {
  std::lock_guard lock(mu_);
  while (!idle_.empty()) {
    auto c = std::move(idle_.back());
    idle_.pop_back();
    if (c->ready()) return c;
  }
  return nullptr;
}

void ConnectionPool::giveBack(std::unique_ptr<Connection> c) {
  std::lock_guard lock(mu_);
  if (idle_.size() < keep_) idle_.push_back(std::move(c));
}

Result<QueryResult> ConnectionPool::query(const std::string& sql) {
  auto conn = take();
  if (!conn) {
    auto fresh = openForQueries(conninfo_, timeout_);
    if (!fresh) return Error{fresh.error()};
    conn = std::move(fresh).value();
    std::lock_guard lock(mu_);
    ++opened_;
  }
  auto r = queryOn(*conn, sql, timeout_);
  if (r) giveBack(std::move(conn));
  return r;
}

size_t ConnectionPool::opened() const {
  std::lock_guard lock(mu_);
  return opened_;
}

}  // namespace dugong::pg
