#include "agent/scaffold/sweep.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "agent/store/run_store.h"
#include "base/settings.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A folder-name-safe label of one value.
std::string label_of(const json& v) {
  std::string text;
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_array()) {
    for (const auto& x : v) text += (text.empty() ? "" : "+") + label_of(x);
    if (text.empty()) text = "none";
  } else if (v.is_object()) {
    for (const char* key : {"label", "model", "kind"}) {
      if (v.contains(key) && v[key].is_string()) {
        text = v[key].get<std::string>();
        break;
      }
    }
  } else if (v.is_null()) {
    text = "null";
  } else {
    text = v.dump();
  }
  std::string safe;
  for (char c : text) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '+') ? c : '_';
  return safe;
}

void set_at(json& j, const std::string& dotted, const json& value) {
  json* cur = &j;
  std::size_t from = 0;
  for (;;) {
    const std::size_t dot = dotted.find('.', from);
    const std::string key = dotted.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (dot == std::string::npos) {
      (*cur)[key] = value;
      return;
    }
    if (!cur->contains(key) || !(*cur)[key].is_object()) (*cur)[key] = json::object();
    cur = &(*cur)[key];
    from = dot + 1;
  }
}

// A run's config from its JSON with the command line's overrides applied;
// an error about a field they set says so.
RunConfig config_with_overrides(json j, const std::string& path, const ConfigOverrides& overrides) {
  apply_overrides(j, overrides);
  try {
    RunConfig c = run_config_from_json(j, path);
    c.overrides = overrides.describe();
    return c;
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    for (const auto& field : overridden_fields(overrides)) {
      if (what.find("field '" + field) != std::string::npos) {
        throw std::invalid_argument(what + " (set on the command line: " + (field == "problems" ? "--problems" : "--set " + field) + ")");
      }
    }
    throw;
  }
}

}  // namespace

std::vector<SweepRun> load_run_configs(const std::string& path, const ConfigOverrides& overrides) {
  json base = read_config_json(path);
  if (!base.contains("sweep")) return {{"", config_with_overrides(base, path, overrides)}};
  const json sweep = base["sweep"];
  base.erase("sweep");
  auto fail = [&](const std::string& field, const std::string& what) {
    throw std::invalid_argument(settings_error(path, 0, field, what));
  };
  if (!sweep.is_object() || sweep.empty()) {
    fail("sweep", "expected a map of field paths to lists of values, e.g. {provider.model: [gpt-5, o3]}");
  }
  struct Axis {
    std::string key;
    std::string short_name;
    std::vector<json> values;
    std::vector<std::string> labels;
  };
  std::vector<Axis> axes;
  for (const auto& [key, values] : sweep.items()) {
    if (key == "name" || key == "runs_dir" || key == "sweep") fail("sweep." + key, "a sweep cannot vary the run's name or folder");
    if (!values.is_array() || values.empty()) fail("sweep." + key, "expected a list of the values to run, e.g. [a, b]");
    Axis a;
    a.key = key;
    a.short_name = key.substr(key.rfind('.') + 1);
    std::set<std::string> seen;
    for (const auto& v : values) {
      json value = v;
      if (value.is_object()) value.erase("label");
      a.values.push_back(value);
      a.labels.push_back(label_of(v));
      if (a.labels.back().empty()) {
        fail("sweep." + key, v.dump() + " has no label; give the block a `label: NAME` (or a model or kind)");
      }
      if (!seen.insert(a.labels.back()).second) {
        fail("sweep." + key, "two values are labelled '" + a.labels.back() + "'; give each a distinct `label`");
      }
    }
    axes.push_back(std::move(a));
  }
  const std::string name = base.value("name", fs::path(path).stem().string());
  if (const std::string why = run_name_problem(name); !why.empty()) {
    fail("name", "'" + name.substr(0, 200) + "' cannot name a sweep: " + why);
  }
  for (const auto& field : overridden_fields(overrides)) {
    if (field == "name" || field == "runs_dir") {
      throw std::invalid_argument("--set " + field + ": a sweep names its runs NAME/<point>; use --name or --runs-dir");
    }
    for (const auto& a : axes) {
      const bool overlap = field == a.key || field.rfind(a.key + ".", 0) == 0 || a.key.rfind(field + ".", 0) == 0;
      if (overlap) {
        throw std::invalid_argument(path + ": field 'sweep." + a.key + "': the sweep varies it, so " +
                                    (field == "problems" ? std::string("--problems") : "--set " + field) +
                                    " would make its runs alike; change the sweep's values in the file instead");
      }
    }
  }
  std::vector<SweepRun> runs;
  std::vector<std::size_t> at(axes.size(), 0);
  for (;;) {
    json point_json = base;
    std::string point;
    for (std::size_t i = 0; i < axes.size(); ++i) {
      set_at(point_json, axes[i].key, axes[i].values[at[i]]);
      point += (point.empty() ? "" : "/") + axes[i].short_name + "=" + axes[i].labels[at[i]];
    }
    point_json["name"] = name + "/" + point;
    try {
      runs.push_back({point, config_with_overrides(point_json, path, overrides)});
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(e.what()) + " (in sweep point " + point + ")");
    }
    // The next point: the last axis fastest.
    std::size_t i = axes.size();
    while (i > 0 && ++at[i - 1] == axes[i - 1].values.size()) at[--i] = 0;
    if (i == 0) break;
  }
  return runs;
}

void write_sweep_index(const std::vector<SweepRun>& runs) {
  if (runs.empty() || runs.front().point.empty()) return;
  const RunConfig& first = runs.front().config;
  const std::string sweep_name = first.name.substr(0, first.name.size() - runs.front().point.size() - 1);
  if (const std::string why = run_name_problem(sweep_name); !why.empty()) {
    throw std::invalid_argument("sweep name '" + sweep_name.substr(0, 200) + "' cannot be used: " + why);
  }
  const fs::path dir = fs::path(first.runs_dir) / sweep_name;
  fs::create_directories(dir);
  json index = {{"sweep", sweep_name}, {"config_file", first.path}, {"runs", json::array()}};
  for (const auto& r : runs) index["runs"].push_back(r.point);
  RunStore::write_text((dir / "sweep.json").string(), index.dump(2) + "\n");
}

std::vector<std::string> sweep_runs(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "sweep.json");
  if (!in) return {};
  json index;
  try {
    in >> index;
  } catch (const json::exception&) {
    throw std::runtime_error((fs::path(dir) / "sweep.json").string() + ": not a sweep index; remove it");
  }
  std::vector<std::string> out;
  for (const auto& p : index.value("runs", json::array())) {
    const fs::path run = fs::path(dir) / p.get<std::string>();
    if (fs::exists(run / "config.json")) out.push_back(run.string());
  }
  return out;
}

}  // namespace kloop
