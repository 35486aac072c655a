#include "pg/plan/standby_names.h"

#include <cctype>

namespace dugong::pg {

namespace {

class Scanner {
 public:
  explicit Scanner(const std::string& text) : s_(text) {}
  void skipSpace() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool done() {
    skipSpace();
    return i_ >= s_.size();
  }
  bool take(char c) {
    skipSpace();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  size_t pos() const { return i_; }
  void reset(size_t p) { i_ = p; }
  // An identifier, a quoted name or a number; empty on failure.
  Result<std::string> word(bool* quoted) {
    skipSpace();
    *quoted = false;
    if (i_ >= s_.size()) return Error{"a name is missing"};
    if (s_[i_] == '"') {
      *quoted = true;
      std::string out;
      for (++i_; i_ < s_.size(); ++i_) {
        if (s_[i_] == '"') {
          if (i_ + 1 < s_.size() && s_[i_ + 1] == '"') {
            out += '"';
            ++i_;
          } else {
            ++i_;
            if (out.empty()) return Error{"an empty quoted name"};
            return out;
          }
        } else {
          out += s_[i_];
        }
      }
      return Error{"an unterminated quoted name"};
    }
    std::string out;
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '*' ||
            static_cast<unsigned char>(c) >= 0x80)) {
        break;
      }
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      ++i_;
    }
    if (out.empty()) return Error{std::string("unexpected '") + s_[i_] + "'"};
    return out;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
};

bool allDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

Result<std::vector<std::string>> nameList(Scanner& sc) {
  std::vector<std::string> names;
  do {
    bool quoted = false;
    auto w = sc.word(&quoted);
    if (!w) return Error{w.error()};
    names.push_back(w.value());
  } while (sc.take(','));
  return names;
}

}  // namespace

Result<StandbyNames> parseStandbyNames(const std::string& text) {
  StandbyNames out;
  Scanner sc(text);
  if (sc.done()) return out;
  auto fail = [&](const std::string& why) {
    return Error{"synchronous_standby_names '" + text + "': " + why};
  };
  size_t start = sc.pos();
  bool quoted = false;
  auto first = sc.word(&quoted);
  if (!first) return fail(first.error());
  bool hasMethod = !quoted && (first.value() == "first" || first.value() == "any");
  std::string number;
  if (hasMethod) {
    out.method = first.value() == "any" ? StandbyNames::Method::kAny : StandbyNames::Method::kFirst;
    auto n = sc.word(&quoted);
    if (n && !quoted && allDigits(n.value())) {
      number = n.value();
    } else {
      // "first" or "any" used as a standby name in a plain list.
      hasMethod = false;
      out.method = StandbyNames::Method::kFirst;
      sc.reset(start);
    }
  } else if (!quoted && allDigits(first.value())) {
    number = first.value();
  } else {
    sc.reset(start);
  }
  if (!number.empty()) {
    if (!sc.take('(')) return fail("expected '(' after the number");
    auto names = nameList(sc);
    if (!names) return fail(names.error());
    if (!sc.take(')')) return fail("expected ')'");
    out.count = std::stoi(number);
    out.names = std::move(names).value();
  } else {
    auto names = nameList(sc);
    if (!names) return fail(names.error());
    out.count = 1;
    out.names = std::move(names).value();
  }
  if (!sc.done()) return fail("unexpected text after the list");
  return out;
}

namespace {
// Postgres matches application names case-insensitively.
bool sameName(const std::string& listed, const std::string& name) {
  if (listed.size() != name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(listed[i])) != std::tolower(static_cast<unsigned char>(name[i]))) {
      return false;
    }
  }
  return true;
}

// The parsed list names exactly `names`, each once, and no "*" (which matches any standby).
bool listsExactly(const StandbyNames& parsed, const std::vector<std::string>& names) {
  if (names.empty() || parsed.names.size() != names.size()) return false;
  for (const std::string& name : names) {
    int matches = 0;
    for (const std::string& listed : parsed.names) {
      if (listed == "*") return false;
      if (sameName(listed, name)) ++matches;
    }
    if (matches != 1) return false;
  }
  return true;
}
}  // namespace

bool waitsForAll(const std::string& text, const std::vector<std::string>& names) {
  auto parsed = parseStandbyNames(text);
  // Every standby listed must be acknowledged.
  return parsed && parsed->count == static_cast<int>(names.size()) && listsExactly(*parsed, names);
}

bool waitsForQuorum(const std::string& text, const StandbyQuorum& quorum) {
  auto parsed = parseStandbyNames(text);
  return parsed && validQuorum(quorum) && parsed->method == StandbyNames::Method::kAny && parsed->count == quorum.k &&
         listsExactly(*parsed, quorum.members);
}

std::string quoteStandbyName(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string renderQuorum(const StandbyQuorum& quorum) {
  std::string out = "ANY " + std::to_string(quorum.k) + " (";
  for (size_t i = 0; i < quorum.members.size(); ++i) {
    if (i > 0) out += ", ";
    out += quoteStandbyName(quorum.members[i]);
  }
  return out + ")";
}

Result<bool> validQuorum(const StandbyQuorum& quorum) {
  const int n = static_cast<int>(quorum.members.size());
  if (n == 0) return Error{"a quorum needs at least one member"};
  if (quorum.k < 1 || quorum.k > n) {
    return Error{"a quorum of " + std::to_string(n) + " members cannot wait for " + std::to_string(quorum.k)};
  }
  for (size_t i = 0; i < quorum.members.size(); ++i) {
    if (quorum.members[i].empty()) return Error{"a quorum member has an empty name"};
    if (quorum.members[i] == "*") return Error{"a quorum member named * would stand for any standby"};
    for (size_t j = 0; j < i; ++j) {
      if (sameName(quorum.members[j], quorum.members[i])) {
        return Error{"'" + quorum.members[i] + "' is a quorum member twice"};
      }
    }
  }
  return true;
}

bool waitsForExactly(const std::string& text, const std::string& name) { return waitsForAll(text, {name}); }

}  // namespace dugong::pg
