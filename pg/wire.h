// The framing of PostgreSQL's frontend/backend protocol, version 3.0: the client's
// messages as bytes, and the server's messages cut out of a byte stream. No I/O here
// (pg/connection.h does that), so the framing is tested on its own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "statemachine/result.h"

namespace dugong::pg::wire {

// ---- client messages
// StartupMessage: protocol 3.0 and the parameters (user, database, options, ...).
std::string startup(const std::vector<std::pair<std::string, std::string>>& parameters);
std::string query(std::string_view sql);                  // 'Q', simple query
std::string password(std::string_view cleartext);          // 'p', PasswordMessage
std::string saslInitialResponse(std::string_view mechanism, std::string_view data);  // 'p'
std::string saslResponse(std::string_view data);           // 'p'
std::string terminate();                                   // 'X'
std::string copyFail(std::string_view reason);             // 'f'
std::string cancelRequest(int32_t pid, int32_t secret);    // on a new connection

// ---- server messages
struct Message {
  char type = 0;
  std::string body;  // without the type byte and the length
};

// Bytes in, whole messages out. A length below 4 or above kMaxMessage is an error.
class MessageReader {
 public:
  static constexpr size_t kMaxMessage = size_t{1} << 30;
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next whole message, nullopt if more bytes are needed, or an error.
  Result<std::optional<Message>> next();
  // Bytes fed and not yet returned as a message.
  size_t buffered() const { return buffer_.size() - used_; }

 private:
  std::string buffer_;
  size_t used_ = 0;
};

// Reads the fields of a message body in order; any read past the end sets failed().
class BodyCursor {
 public:
  explicit BodyCursor(std::string_view body) : rest_(body) {}
  int32_t int32();
  int16_t int16();
  std::string cstring();                 // up to the terminating NUL
  std::string bytes(size_t count);
  std::string_view remaining() const { return rest_; }
  bool failed() const { return failed_; }

 private:
  std::string_view rest_;
  bool failed_ = false;
};

// ErrorResponse / NoticeResponse: the fields by their code ('S' severity, 'C' SQLSTATE,
// 'M' message, 'D' detail, 'H' hint, ...), and one line for logs: "FATAL: message
// (DETAIL: detail)".
std::map<char, std::string> noticeFields(std::string_view body);
std::string describeError(std::string_view body);

}  // namespace dugong::pg::wire
