// YAML files users bring from elsewhere (run configs, problem specs,
// another harness's generation_config.yaml) are data: read with a size
// limit, and checked against alias bombs before anything walks them (a
// 448-byte file of nested aliases expands to billions of values; kloop once
// died of std::bad_alloc on one).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kloop {

// Thrown for every problem with such a file; the message names the file,
// what is wrong and the limit.
class YamlInputError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct YamlLimits {
  uint64_t max_bytes = 16u << 20;  // the file
  uint64_t max_values = 1000000;   // scalars, lists and maps, aliases counted as expanded
  int max_depth = 64;              // nesting
  bool follow_links = true;        // false for files in a folder someone else made
};

// `path` parsed and checked (YamlInputError otherwise; a parse error says
// the line).
YAML::Node load_yaml_file(const std::string& path, const YamlLimits& limits = {});

// Throws YamlInputError naming `path` when `node`, its aliases expanded,
// holds more values or nests deeper than `limits` allow.
void check_yaml_size(const YAML::Node& node, const std::string& path, const YamlLimits& limits = {});

}  // namespace kloop
