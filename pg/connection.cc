#include "pg/connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <thread>
#include <vector>

namespace dugong::pg {
namespace {

using Clock = Connection::Clock;

std::string trimmed(const char* s) {
  std::string out = s ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

// Waits for `events` on fd until the deadline: false when the deadline passed first.
// An error or hang-up on the socket counts as ready: libpq reads and reports it.
bool waitFd(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, msLeft(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return true;
  }
}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultDeleter>;

QueryResult toQueryResult(const PGresult* res) {
  QueryResult out;
  const int fields = PQnfields(res);
  for (int f = 0; f < fields; ++f) out.columns.emplace_back(PQfname(res, f));
  for (int r = 0; r < PQntuples(res); ++r) {
    Row row;
    for (int f = 0; f < fields; ++f) {
      if (PQgetisnull(res, r, f)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(std::string(PQgetvalue(res, r, f), static_cast<size_t>(PQgetlength(res, r, f))));
      }
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace

Result<std::map<std::string, std::string>> parseConninfo(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (!options) {
    std::string why = error ? trimmed(error) : "out of memory";
    PQfreemem(error);
    return Error{"connection string: " + why};
  }
  std::map<std::string, std::string> out;
  for (PQconninfoOption* o = options; o->keyword; ++o) {
    if (o->val) out[o->keyword] = o->val;
  }
  PQconninfoFree(options);
  return out;
}

Connection::Connection(pg_conn* conn) : conn_(conn) {
  // Notices go nowhere by default (libpq would print them on stderr); a query keeps its
  // WARNINGs for an error that ends the session (a commit the server stopped waiting for).
  PQsetNoticeReceiver(
      conn_,
      [](void* self, const PGresult* r) {
        if (trimmed(PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED)) == "WARNING") {
          static_cast<Connection*>(self)->warnings_ += "; " + trimmed(PQresultErrorMessage(r));
        }
      },
      this);
}

Connection::~Connection() { PQfinish(conn_); }

Result<std::unique_ptr<Connection>> Connection::open(const std::string& conninfo, Clock::time_point deadline) {
  auto parsed = parseConninfo(conninfo);
  if (!parsed) return Error{parsed.error()};
  // No GSSAPI encryption unless asked for (gssencmode in the string, or PGGSSENCMODE):
  // dugong configures TLS (tls.sslmode), and libpq's default, prefer, would use GSSAPI
  // encryption instead of TLS whatever sslmode says wherever Kerberos credentials exist
  // (PostgreSQL's documentation of sslmode), and probes for them on every TCP
  // connection, which keeps about 0.6 MB of Kerberos libraries resident. GSSAPI
  // authentication (pg_hba method gss) is unaffected.
  if (parsed->count("gssencmode") == 0 && std::getenv("PGGSSENCMODE") == nullptr) {
    parsed.value()["gssencmode"] = "disable";
  }
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : parsed.value()) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* raw = PQconnectStartParams(keys.data(), values.data(), 0);
  if (!raw) return Error{"libpq: out of memory"};
  std::unique_ptr<Connection> c(new Connection(raw));
  if (PQstatus(raw) == CONNECTION_BAD) return Error{trimmed(PQerrorMessage(raw))};
  // As libpq's documentation says: start as if PQconnectPoll had asked to write.
  PostgresPollingStatusType status = PGRES_POLLING_WRITING;
  while (status != PGRES_POLLING_OK) {
    if (status == PGRES_POLLING_FAILED) return Error{trimmed(PQerrorMessage(raw))};
    // The socket changes from one host (or address) to the next: asked every time.
    const int fd = PQsocket(raw);
    if (fd < 0) return Error{trimmed(PQerrorMessage(raw))};
    if (!waitFd(fd, status == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline)) {
      return Error{"timeout expired"};
    }
    status = PQconnectPoll(raw);
  }
  // Nothing blocks from here on: queries are sent and flushed as the socket allows.
  if (PQsetnonblocking(raw, 1) != 0) return Error{trimmed(PQerrorMessage(raw))};
  return c;
}

std::string Connection::parameter(const std::string& name) const {
  return trimmed(PQparameterStatus(conn_, name.c_str()));
}

bool Connection::usesTls() const { return PQsslInUse(conn_) == 1; }

bool Connection::ready() const {
  if (failed_ || PQstatus(conn_) != CONNECTION_OK || PQtransactionStatus(conn_) != PQTRANS_IDLE) return false;
  pollfd p{PQsocket(conn_), POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

Result<QueryResult> Connection::query(const std::string& sql, Clock::time_point deadline) {
  warnings_.clear();
  const auto connectionError = [this] {
    failed_ = true;
    return Error{trimmed(PQerrorMessage(conn_)) + warnings_};
  };
  // Flushes what is to send and reads until a whole result is there, within the deadline.
  const auto awaitResult = [&]() -> Result<bool> {
    while (true) {
      const int flushed = PQflush(conn_);
      if (flushed < 0) return connectionError();
      if (flushed == 0 && !PQisBusy(conn_)) return true;
      if (!waitFd(PQsocket(conn_), static_cast<short>(POLLIN | (flushed == 1 ? POLLOUT : 0)), deadline)) {
        cancel();
        return Error{"timeout expired"};
      }
      if (!PQconsumeInput(conn_)) return connectionError();
    }
  };
  if (!PQsendQuery(conn_, sql.c_str())) return connectionError();
  ResultPtr last;
  std::optional<std::string> firstError;
  while (true) {
    if (auto ready = awaitResult(); !ready) return Error{ready.error()};
    ResultPtr next(PQgetResult(conn_));
    if (!next) break;
    switch (PQresultStatus(next.get())) {
      case PGRES_TUPLES_OK:
      case PGRES_COMMAND_OK:
      case PGRES_EMPTY_QUERY:
        last = std::move(next);
        break;
      case PGRES_COPY_IN:  // refused: nothing here sends COPY data
        if (PQputCopyEnd(conn_, "COPY FROM STDIN is not supported by dugong's client") < 0) return connectionError();
        break;
      case PGRES_COPY_OUT: {  // its data is skipped
        char* row = nullptr;
        int n = 0;
        while ((n = PQgetCopyData(conn_, &row, 1)) != -1) {
          if (n == -2) return connectionError();
          if (row) PQfreemem(row);
          row = nullptr;
          if (n == 0) {
            if (!waitFd(PQsocket(conn_), POLLIN, deadline)) {
              cancel();
              return Error{"timeout expired"};
            }
            if (!PQconsumeInput(conn_)) return connectionError();
          }
        }
        break;
      }
      default:
        if (!firstError) firstError = trimmed(PQresultErrorMessage(next.get()));
        break;
    }
  }
  if (PQstatus(conn_) != CONNECTION_OK) failed_ = true;
  if (firstError) return Error{*firstError + (failed_ ? warnings_ : "")};
  if (!last) return QueryResult{};
  return toQueryResult(last.get());
}

void Connection::cancel() {
  failed_ = true;
  PGcancel* request = PQgetCancel(conn_);
  if (!request) return;
  // PQcancel connects anew and waits until the server has read the request, with no
  // bound of its own: a thread of its own carries it, so that the caller's deadline
  // holds even against a server that stopped answering.
  std::thread([request] {
    char error[256];
    PQcancel(request, error, sizeof error);
    PQfreeCancel(request);
  }).detach();
}

}  // namespace dugong::pg
