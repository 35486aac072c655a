#include "pg/wire.h"

namespace dugong::pg::wire {
namespace {

void putInt32(std::string& out, int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((u >> shift) & 0xff);
}

void putCString(std::string& out, std::string_view s) {
  out.append(s);
  out += '\0';
}

// Type byte, then the length (counting itself) and the body.
std::string framed(char type, std::string_view body) {
  std::string out(1, type);
  putInt32(out, static_cast<int32_t>(body.size() + 4));
  out.append(body);
  return out;
}

// Untyped (startup, cancel): the length counts itself.
std::string untyped(std::string_view body) {
  std::string out;
  putInt32(out, static_cast<int32_t>(body.size() + 4));
  out.append(body);
  return out;
}

}  // namespace

std::string startup(const std::vector<std::pair<std::string, std::string>>& parameters) {
  std::string body;
  putInt32(body, 3 << 16);  // protocol 3.0
  for (const auto& [k, v] : parameters) {
    putCString(body, k);
    putCString(body, v);
  }
  body += '\0';
  return untyped(body);
}

std::string query(std::string_view sql) {
  std::string body;
  putCString(body, sql);
  return framed('Q', body);
}

std::string password(std::string_view cleartext) {
  std::string body;
  putCString(body, cleartext);
  return framed('p', body);
}

std::string saslInitialResponse(std::string_view mechanism, std::string_view data) {
  std::string body;
  putCString(body, mechanism);
  putInt32(body, static_cast<int32_t>(data.size()));
  body.append(data);
  return framed('p', body);
}

std::string saslResponse(std::string_view data) { return framed('p', data); }

std::string terminate() { return framed('X', ""); }

std::string copyFail(std::string_view reason) {
  std::string body;
  putCString(body, reason);
  return framed('f', body);
}

std::string cancelRequest(int32_t pid, int32_t secret) {
  std::string body;
  putInt32(body, (1234 << 16) | 5678);  // the cancel request code
  putInt32(body, pid);
  putInt32(body, secret);
  return untyped(body);
}

Result<std::optional<Message>> MessageReader::next() {
  const size_t available = buffer_.size() - used_;
  if (available < 5) return std::optional<Message>();
  const auto* p = reinterpret_cast<const uint8_t*>(buffer_.data() + used_);
  const uint32_t length = uint32_t{p[1]} << 24 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 8 | p[4];
  if (length < 4 || length > kMaxMessage) {
    return Error{"protocol error: message '" + std::string(1, static_cast<char>(p[0])) + "' has a bad length " +
                 std::to_string(length)};
  }
  if (available < 1 + size_t{length}) return std::optional<Message>();
  Message m{static_cast<char>(p[0]), buffer_.substr(used_ + 5, length - 4)};
  used_ += 1 + length;
  if (used_ == buffer_.size() || used_ > (size_t{1} << 16)) {
    buffer_.erase(0, used_);
    used_ = 0;
  }
  return std::optional<Message>(std::move(m));
}

int32_t BodyCursor::int32() {
  if (rest_.size() < 4) {
    failed_ = true;
    rest_ = {};
    return 0;
  }
  const auto* p = reinterpret_cast<const uint8_t*>(rest_.data());
  rest_.remove_prefix(4);
  return static_cast<int32_t>(uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3]);
}

int16_t BodyCursor::int16() {
  if (rest_.size() < 2) {
    failed_ = true;
    rest_ = {};
    return 0;
  }
  const auto* p = reinterpret_cast<const uint8_t*>(rest_.data());
  rest_.remove_prefix(2);
  return static_cast<int16_t>(uint16_t{p[0]} << 8 | p[1]);
}

std::string BodyCursor::cstring() {
  auto end = rest_.find('\0');
  if (end == std::string_view::npos) {
    failed_ = true;
    rest_ = {};
    return "";
  }
  std::string out(rest_.substr(0, end));
  rest_.remove_prefix(end + 1);
  return out;
}

std::string BodyCursor::bytes(size_t count) {
  if (rest_.size() < count) {
    failed_ = true;
    rest_ = {};
    return "";
  }
  std::string out(rest_.substr(0, count));
  rest_.remove_prefix(count);
  return out;
}

std::map<char, std::string> noticeFields(std::string_view body) {
  std::map<char, std::string> out;
  BodyCursor c(body);
  while (!c.remaining().empty() && c.remaining()[0] != '\0') {
    char code = c.bytes(1)[0];
    std::string value = c.cstring();
    if (c.failed()) break;
    out[code] = std::move(value);
  }
  return out;
}

std::string describeError(std::string_view body) {
  auto f = noticeFields(body);
  std::string severity = f.count('V') ? f['V'] : f.count('S') ? f['S'] : "ERROR";
  std::string out = severity + ":  " + (f.count('M') ? f['M'] : "(no message)");
  if (f.count('D')) out += " (DETAIL: " + f['D'] + ")";
  return out;
}

}  // namespace dugong::pg::wire
