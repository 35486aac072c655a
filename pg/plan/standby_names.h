// synchronous_standby_names as postgres reads it: `FIRST n (a, b)`, `ANY n (a, b)`,
// `n (a, b)` or a plain list `a, b` (which means FIRST 1). Names are identifiers or
// double-quoted ("" inside quotes is one "). Used to verify a fence exactly: a name is
// in the list, or it is not ("db1" is not in "db10").
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

// True when `text` makes commits wait for exactly one standby, `name`, and no other
// (postgres compares names case-insensitively; "*" would match any standby).
bool waitsForExactly(const std::string& text, const std::string& name);
// True when `text` makes commits wait for every one of `names` (distinct) and no other:
// as many acknowledgements as names, from exactly these standbys.
bool waitsForAll(const std::string& text, const std::vector<std::string>& names);

}  // namespace dugong::pg
