// The settings reader of settings.h.
#include "base/settings.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace kloop {

std::string settings_error(const std::string& file, int line, const std::string& field, const std::string& what) {
  std::string where = file;
  if (!where.empty() && line >= 1) where += ":" + std::to_string(line);
  return (where.empty() ? "" : where + ": ") + "field '" + field + "': " + what;
}

SettingsReader::SettingsReader(const nlohmann::json& block, std::string file, std::string prefix)
    : block_(block.is_null() ? nlohmann::json::object() : block), file_(std::move(file)), prefix_(std::move(prefix)) {}

SettingsReader SettingsReader::block(const std::string& key) const {
  if (has(key) && !at(key).is_object()) fail(key, "expected a mapping of fields, got " + at(key).dump());
  return SettingsReader(has(key) ? at(key) : nlohmann::json::object(), file_, prefix_ + key + ".");
}

void SettingsReader::fail(const std::string& field, const std::string& what) const {
  throw std::invalid_argument(settings_error(file_, 0, prefix_ + field, what));
}

void SettingsReader::known(const std::set<std::string>& keys) const {
  if (!block_.is_object()) {
    throw std::invalid_argument(settings_error(file_, 0,
                                               prefix_.empty() ? "(top)" : prefix_.substr(0, prefix_.size() - 1),
                                               "expected a mapping of fields, got " + block_.dump()));
  }
  for (const auto& [k, v] : block_.items()) {
    if (keys.count(k)) continue;
    std::string list;
    for (const auto& x : keys) list += (list.empty() ? "" : ", ") + x;
    fail(k, "unknown field; known fields: " + list);
  }
}

std::string SettingsReader::text(const std::string& key) const {
  if (!at(key).is_string()) fail(key, "expected a string, got " + at(key).dump());
  return at(key).get<std::string>();
}

double SettingsReader::number(const std::string& key) const {
  const auto& v = at(key);
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0' && std::isfinite(d)) return d;
  }
  fail(key, "expected a number, got " + v.dump());
}

long long SettingsReader::whole(const std::string& key) const {
  const double d = number(key);
  if (d != std::floor(d) || std::fabs(d) > 9.0e15) fail(key, "expected a whole number, got " + at(key).dump());
  return static_cast<long long>(d);
}

double SettingsReader::non_negative(const std::string& key) const {
  const double d = number(key);
  if (d < 0) fail(key, "must not be negative (got " + at(key).dump() + ")");
  return d;
}

std::chrono::milliseconds SettingsReader::seconds(const std::string& key) const {
  const double s = number(key);
  if (s <= 0) fail(key, "must be a positive number of seconds (got " + at(key).dump() + ")");
  return std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000.0)));
}

std::vector<std::string> SettingsReader::strings(const std::string& key, bool allow_single) const {
  const auto& v = at(key);
  if (allow_single && v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) fail(key, "expected a list of strings, got " + v.dump());
  std::vector<std::string> out;
  for (const auto& item : v) {
    if (!item.is_string()) fail(key, "expected a list of strings; " + item.dump() + " is not a string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::string SettingsReader::resolve_path(const std::string& p) const {
  namespace fs = std::filesystem;
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (fs::path(file_).parent_path() / p).lexically_normal().string();
}

}  // namespace kloop
