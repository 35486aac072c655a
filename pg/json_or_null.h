// An optional value as JSON: the value, or null. For the status documents of pg/.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

namespace dugong::pg {

template <class T>
nlohmann::json jsonOrNull(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace dugong::pg
