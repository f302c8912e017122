// Reading settings people write: run configs and sweeps, the provider
// block, problem specs. One form for every error, naming the file (and the
// line, where the reader knows it), the field and the fix:
//   FILE[:LINE]: field 'scaffold.samples': expected a whole number, got 1.5
// and one reader of a JSON block (YAML is converted first), so a field's
// type, its default and the words of its error are decided in one place.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace kloop {

// "FILE:LINE: field 'FIELD': WHAT" (no ":LINE" when line < 1; no "FILE: "
// when file is empty).
std::string settings_error(const std::string& file, int line, const std::string& field, const std::string& what);

// The fields of one block of a settings file. `prefix` is the block's path
// ("provider." for the provider block): fields are named by their whole
// path in errors. Errors are std::invalid_argument.
class SettingsReader {
 public:
  SettingsReader(const nlohmann::json& block, std::string file, std::string prefix = "");

  // The block under `key` (which must be a mapping when given; an absent one
  // reads as empty): its fields are named "<prefix><key>.<field>".
  SettingsReader block(const std::string& key) const;

  [[noreturn]] void fail(const std::string& field, const std::string& what) const;
  // Every field of the block is one of `keys`, or an error naming them.
  void known(const std::set<std::string>& keys) const;

  bool has(const std::string& key) const { return block_.contains(key) && !block_[key].is_null(); }
  const nlohmann::json& at(const std::string& key) const { return block_[key]; }
  const nlohmann::json& json() const { return block_; }

  // A field of type T, or `fallback` when it is absent or null. Whole
  // numbers must be whole (1.5 is not 1) and unsigned ones not negative;
  // a number written as a string ("0.7", as a quoted YAML scalar reads)
  // counts as that number.
  template <typename T>
  T get(const std::string& key, T fallback) const {
    if (!has(key)) return fallback;
    if constexpr (std::is_same_v<T, bool>) {
      if (!at(key).is_boolean()) fail(key, "expected true or false, got " + at(key).dump());
      return at(key).template get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      const long long v = whole(key);
      if (std::is_unsigned_v<T> && v < 0) fail(key, "expected a number >= 0, got " + at(key).dump());
      return static_cast<T>(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(number(key));
    } else {
      try {
        return at(key).template get<T>();
      } catch (const nlohmann::json::exception&) {
        fail(key, "has the wrong type (" + at(key).dump() + ")");
      }
    }
  }

  std::string text(const std::string& key) const;
  double number(const std::string& key) const;
  long long whole(const std::string& key) const;
  double non_negative(const std::string& key) const;
  std::chrono::milliseconds seconds(const std::string& key) const;  // a positive number of seconds
  // A list of strings (`allow_single`: or one string, as a list of one).
  std::vector<std::string> strings(const std::string& key, bool allow_single) const;

  // A path written in the file: relative to the file's folder.
  std::string resolve_path(const std::string& p) const;
  const std::string& file() const { return file_; }

 private:
  nlohmann::json block_;
  std::string file_;
  std::string prefix_;
};

}  // namespace kloop
