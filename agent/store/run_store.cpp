// The run folder on disk.
#include "agent/store/run_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

}  // namespace

std::string utc_timestamp() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json AttemptRecord::to_json() const {
  json j = {{"run", run},
            {"problem", problem},
            {"level", level},
            {"sample", sample},
            {"turn", turn},
            {"verdict", verdict},
            {"speedup", speedup ? json(*speedup) : json(nullptr)},
            {"message", message},
            {"protocol", protocol},
            {"device", device},
            {"model", model},
            {"input_tokens", input_tokens},
            {"output_tokens", output_tokens},
            {"reasoning_tokens", reasoning_tokens},
            {"cost_usd", cost_usd},
            {"llm_seconds", llm_seconds},
            {"eval_seconds", eval_seconds},
            {"finish_reason", finish_reason},
            {"chain_done", chain_done},
            {"stop_reason", stop_reason},
            {"attempt_dir", attempt_dir},
            {"timestamp", timestamp}};
  return j;
}

AttemptRecord AttemptRecord::from_json(const json& j) {
  AttemptRecord r;
  r.run = j.value("run", "");
  r.problem = j.at("problem").get<std::string>();
  r.level = j.value("level", 0);
  r.sample = j.at("sample").get<int>();
  r.turn = j.at("turn").get<int>();
  r.verdict = j.at("verdict").get<std::string>();
  if (j.contains("speedup") && j["speedup"].is_number()) r.speedup = j["speedup"].get<double>();
  r.message = j.value("message", "");
  r.protocol = j.value("protocol", "");
  r.device = j.value("device", "");
  r.model = j.value("model", "");
  r.input_tokens = j.value("input_tokens", 0LL);
  r.output_tokens = j.value("output_tokens", 0LL);
  r.reasoning_tokens = j.value("reasoning_tokens", 0LL);
  r.cost_usd = j.value("cost_usd", 0.0);
  r.llm_seconds = j.value("llm_seconds", 0.0);
  r.eval_seconds = j.value("eval_seconds", 0.0);
  r.finish_reason = j.value("finish_reason", "");
  r.chain_done = j.value("chain_done", false);
  r.stop_reason = j.value("stop_reason", "");
  r.attempt_dir = j.value("attempt_dir", "");
  r.timestamp = j.value("timestamp", "");
  return r;
}

RunStore::RunStore(const std::string& runs_dir, const std::string& name)
    : path_((fs::path(runs_dir) / name).string()), name_(name) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    throw std::invalid_argument("run name '" + name + "' must be a plain folder name");
  }
  fs::create_directories(fs::path(path_) / "attempts");
}

void RunStore::write_config(const json& resolved, const std::vector<std::string>& identity_fields) {
  const fs::path p = fs::path(path_) / "config.json";
  if (fs::exists(p)) {
    json old;
    try {
      std::ifstream(p) >> old;
    } catch (const json::exception&) {
      old = json::object();
    }
    for (const auto& f : identity_fields) {
      json a = old.value(f, json());
      json b = resolved.value(f, json());
      if (a != b) {
        throw std::runtime_error(p.string() + ": this run was started with a different '" + f + "' (" + a.dump() +
                                 " vs " + b.dump() + "); use another --name to start a new run");
      }
    }
  }
  write_text(p.string(), resolved.dump(2) + "\n");
}

std::vector<AttemptRecord> RunStore::load_results(const std::string& file) const {
  std::vector<AttemptRecord> out;
  std::ifstream in(fs::path(path_) / file);
  std::set<std::tuple<std::string, int, int>> seen;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      AttemptRecord r = AttemptRecord::from_json(json::parse(line));
      if (seen.insert({r.problem, r.sample, r.turn}).second) out.push_back(std::move(r));
    } catch (const json::exception&) {
      // A line cut short by a kill; its attempt will be redone.
    }
  }
  return out;
}

std::string RunStore::relative_attempt_dir(const std::string& problem, int sample, int turn) const {
  return "attempts/" + problem + "/sample" + std::to_string(sample) + "/turn" + std::to_string(turn);
}

std::string RunStore::attempt_dir(const std::string& problem, int sample, int turn) const {
  fs::path p = fs::path(path_) / relative_attempt_dir(problem, sample, turn);
  fs::create_directories(p);
  return p.string();
}

void RunStore::write_text(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error(path + ": cannot write");
  }
  fs::rename(tmp, path);
}

void RunStore::append(const AttemptRecord& record, const std::string& file) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string p = (fs::path(path_) / file).string();
  int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(p + ": cannot open for appending");
  // A torn last line from a killed run must not swallow this record.
  std::string line;
  if (lseek(fd, 0, SEEK_END) > 0) {
    char last = '\n';
    int rfd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (rfd >= 0) {
      if (pread(rfd, &last, 1, lseek(rfd, -1, SEEK_END)) != 1) last = '\n';
      close(rfd);
    }
    if (last != '\n') line = "\n";
  }
  line += record.to_json().dump() + "\n";
  std::size_t off = 0;
  while (off < line.size()) {
    ssize_t n = write(fd, line.data() + off, line.size() - off);
    if (n <= 0) {
      close(fd);
      throw std::runtime_error(p + ": write failed");
    }
    off += static_cast<std::size_t>(n);
  }
  fsync(fd);
  close(fd);
}

}  // namespace kloop
