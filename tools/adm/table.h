// Plain-text tables for dugong-adm: columns padded to their widest cell, two spaces
// apart, an optional upper-case header. Pure: no I/O.
#pragma once

#include <string>
#include <vector>

#include "statemachine/result.h"

namespace dugong::adm {

using TableRow = std::vector<std::string>;

// Formats `rows` under `headers` (printed upper-cased when `withHeader`). Every row must
// have headers.size() cells; missing cells print empty, extra ones are dropped. Columns
// are left-aligned; the last column is not padded, so no line ends in spaces. Each line
// ends with '\n'. No rows and no header: the empty string.
std::string formatTable(const std::vector<std::string>& headers, const std::vector<TableRow>& rows,
                        bool withHeader = true);

// Parses a "-o" column list ("role,peer,lag"; spaces around names are ignored) against
// the known column names. Errors name the unknown column and list the valid ones; an
// empty list or a repeated column is an error too.
Result<std::vector<std::string>> parseColumns(const std::string& list, const std::vector<std::string>& known);

// "a, b, c": the items joined by a comma and a space, as dugong-adm's messages list names.
std::string joinWithCommas(const std::vector<std::string>& items);

}  // namespace dugong::adm
