#include "tools/adm/table.h"

#include <algorithm>
#include <cctype>

namespace dugong::adm {
namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::string formatTable(const std::vector<std::string>& headers, const std::vector<TableRow>& rows, bool withHeader) {
  const size_t n = headers.size();
  std::vector<TableRow> lines;
  if (withHeader) {
    TableRow h;
    for (const auto& c : headers) h.push_back(upper(c));
    lines.push_back(std::move(h));
  }
  for (const auto& r : rows) {
    TableRow line(n);
    for (size_t i = 0; i < n && i < r.size(); ++i) line[i] = r[i];
    lines.push_back(std::move(line));
  }
  std::vector<size_t> width(n, 0);
  for (const auto& l : lines) {
    for (size_t i = 0; i < n; ++i) width[i] = std::max(width[i], l[i].size());
  }
  std::string out;
  for (const auto& l : lines) {
    std::string text;
    for (size_t i = 0; i < n; ++i) {
      text += l[i];
      if (i + 1 < n) text += std::string(width[i] - l[i].size() + 2, ' ');
    }
    size_t end = text.find_last_not_of(' ');
    text.erase(end == std::string::npos ? 0 : end + 1);
    out += text + "\n";
  }
  return out;
}

Result<std::vector<std::string>> parseColumns(const std::string& list, const std::vector<std::string>& known) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name = trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name.empty()) return Error{"empty column name in \"" + list + "\"; valid columns: " + joinWithCommas(known)};
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Error{"unknown column \"" + name + "\"; valid columns: " + joinWithCommas(known)};
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) return Error{"column \"" + name + "\" is named twice"};
    out.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string joinWithCommas(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace dugong::adm
