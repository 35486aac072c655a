// synchronous_standby_names as postgres reads it: `FIRST n (a, b)`, `ANY n (a, b)`,
// `n (a, b)` or a plain list `a, b` (which means FIRST 1). Names are identifiers or
// double-quoted ("" inside quotes is one "). Used to verify a fence exactly: a name is
// in the list, or it is not ("db1" is not in "db10"). And written: dugong writes every
// name quoted, so that any peer id is one name whatever it holds.
#pragma once

#include <string>
#include <vector>

#include "statemachine/result.h"

namespace dugong::pg {

struct StandbyNames {
  enum class Method { kFirst, kAny };
  Method method = Method::kFirst;
  int count = 0;                   // how many must acknowledge (0 for an empty setting)
  std::vector<std::string> names;  // in order; unquoted names are lower-cased, as postgres does
};

Result<StandbyNames> parseStandbyNames(const std::string& text);

// A quorum (docs/decisions/0079-quorum-commit.md): a commit waits until any k of
// `members` (application names, in order) have flushed it.
struct StandbyQuorum {
  int k = 1;                         // 1 <= k <= members.size()
  std::vector<std::string> members;  // distinct (compared as postgres compares them)
  bool operator==(const StandbyQuorum&) const = default;
};

// One name as synchronous_standby_names takes it: double-quoted, a " doubled, so that
// upper case, spaces, commas, parentheses, quotes and digits first stay one name. The
// text goes into postgresql.conf inside a string (pg/managed_conf.h confQuote).
std::string quoteStandbyName(const std::string& name);
// `ANY k ("m1", "m2")`. REQUIRES: validQuorum(quorum).ok().
std::string renderQuorum(const StandbyQuorum& quorum);
// 1 <= k <= members, at least one member, none empty, none "*" (postgres takes it, quoted
// or not, for any standby), none twice (ignoring case, as postgres matches them): the
// error says which.
Result<bool> validQuorum(const StandbyQuorum& quorum);

// True when `text` makes commits wait for exactly one standby, `name`, and no other
// (postgres compares names case-insensitively; "*" would match any standby).
bool waitsForExactly(const std::string& text, const std::string& name);
// True when `text` makes commits wait for every one of `names` (distinct) and no other:
// as many acknowledgements as names, from exactly these standbys.
bool waitsForAll(const std::string& text, const std::vector<std::string>& names);
// True when `text` is `ANY k (...)` naming exactly the members of `quorum`, each once,
// and no other ("*" would match any standby), with its k: a commit waits for any k of
// them and of no one else. Order does not matter (in ANY mode every listed standby has
// priority 1). `FIRST` is not the same rule (the first k by priority), nor is a plain
// name for one member: its sync_state is 'sync', not 'quorum'.
bool waitsForQuorum(const std::string& text, const StandbyQuorum& quorum);

}  // namespace dugong::pg
