// Limited YAML reading (yaml_input.h).
#include "evaluator/problem/yaml_input.h"

#include <fstream>
#include <sstream>

#include "base/untrusted_tree.h"

namespace kloop {
namespace {

void walk(const YAML::Node& n, const std::string& path, const YamlLimits& limits, int depth, uint64_t& count) {
  if (++count > limits.max_values) {
    throw YamlInputError(path + ": expands to more than " + std::to_string(limits.max_values) +
                         " values (aliases of aliases?); kloop reads no YAML that large");
  }
  if (depth > limits.max_depth) {
    throw YamlInputError(path + ": nests deeper than " + std::to_string(limits.max_depth) + " levels");
  }
  if (n.IsSequence()) {
    for (const auto& x : n) walk(x, path, limits, depth + 1, count);
  } else if (n.IsMap()) {
    for (const auto& kv : n) {
      walk(kv.first, path, limits, depth + 1, count);
      walk(kv.second, path, limits, depth + 1, count);
    }
  }
}

}  // namespace

void check_yaml_size(const YAML::Node& node, const std::string& path, const YamlLimits& limits) {
  uint64_t count = 0;
  walk(node, path, limits, 0, count);
}

YAML::Node load_yaml_file(const std::string& path, const YamlLimits& limits) {
  std::string text;
  if (limits.follow_links) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw YamlInputError(path + ": cannot open the file");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0 || static_cast<uint64_t>(size) > limits.max_bytes) {
      throw YamlInputError(path + ": larger than the " + std::to_string(limits.max_bytes >> 20) +
                           " MiB kloop reads from a YAML file");
    }
    in.seekg(0);
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
  } else {
    try {
      text = read_file_nofollow(path, limits.max_bytes);
    } catch (const std::runtime_error& e) {
      throw YamlInputError(e.what());
    }
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw YamlInputError(path + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  check_yaml_size(root, path, limits);
  return root;
}

}  // namespace kloop
