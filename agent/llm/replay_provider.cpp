// A provider that answers from records of an earlier run, for reproducing a
// run offline or testing the loop without a model.
//
// config.transcript is either
//   - a JSONL file, one line per answer:
//       {"problem": "19_ReLU", "sample": 0, "turn": 1, "response": "...", "reasoning": "..."}
//     ("sample" defaults to 0, "turn" to 1, "reasoning" is optional), or
//   - a run folder holding attempts/<problem>/sample<k>/turn<t>/response.txt
//     (and optionally reasoning.txt beside it).
// Answers are looked up by GenerationRequest::key; tokens and cost are zero.
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>

#include "agent/llm/provider_factories.h"
#include "base/settings.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct RecordedAnswer {
  std::string response;
  std::string reasoning;
};

using RecordKey = std::tuple<std::string, int, int>;  // problem, sample, turn

std::string describe_key(const AttemptKey& key) {
  return "problem '" + key.problem + "' sample " + std::to_string(key.sample) + " turn " + std::to_string(key.turn);
}

std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::map<RecordKey, RecordedAnswer> load_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(settings_error("", 0, "provider.transcript", "cannot read " + path));
  std::map<RecordKey, RecordedAnswer> records;
  std::map<RecordKey, int> first_line;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string where = path + ":" + std::to_string(number) + ": ";
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw std::invalid_argument(where + "not a JSON object");
    if (!j.contains("problem") || !j["problem"].is_string()) {
      throw std::invalid_argument(where + "\"problem\" (a string) is missing");
    }
    if (!j.contains("response") || !j["response"].is_string()) {
      throw std::invalid_argument(where + "\"response\" (a string) is missing");
    }
    for (const char* field : {"sample", "turn"}) {
      if (j.contains(field) && !j[field].is_number_integer()) {
        throw std::invalid_argument(where + "\"" + field + "\" must be an integer");
      }
    }
    if (j.contains("reasoning") && !j["reasoning"].is_string()) {
      throw std::invalid_argument(where + "\"reasoning\" must be a string");
    }
    RecordKey key{j["problem"].get<std::string>(), j.value("sample", 0), j.value("turn", 1)};
    // Two answers for one attempt would make the replay depend on file order.
    auto [it, inserted] = first_line.emplace(key, number);
    if (!inserted) {
      throw std::invalid_argument(where + "a second record for problem '" + std::get<0>(key) + "' sample " +
                                  std::to_string(std::get<1>(key)) + " turn " + std::to_string(std::get<2>(key)) +
                                  " (first on line " + std::to_string(it->second) + ")");
    }
    records[key] = {j["response"].get<std::string>(), j.value("reasoning", std::string())};
  }
  return records;
}

class ReplayProvider : public LlmProvider {
 public:
  explicit ReplayProvider(const ProviderConfig& config) : transcript_(config.transcript) {
    if (transcript_.empty()) {
      throw std::invalid_argument(
          settings_error("", 0, "provider.transcript", "the replay provider needs a run folder or a JSONL file"));
    }
    std::error_code ec;
    if (fs::is_directory(transcript_, ec)) {
      if (!fs::is_directory(fs::path(transcript_) / "attempts", ec)) {
        throw std::invalid_argument(settings_error("", 0, "provider.transcript",
                                                   transcript_ + " is a folder without attempts/: not a run folder"));
      }
      from_folder_ = true;
    } else if (fs::exists(transcript_, ec)) {
      records_ = load_jsonl(transcript_);
    } else {
      throw std::invalid_argument(settings_error("", 0, "provider.transcript", transcript_ + " does not exist"));
    }
  }

  GenerationResult generate(const GenerationRequest& request) override {
    auto start = Clock::now();
    RecordedAnswer answer = from_folder_ ? from_folder(request.key) : from_records(request.key);
    GenerationResult result;
    result.text = std::move(answer.response);
    result.reasoning = std::move(answer.reasoning);
    result.finish_reason = "stop";
    result.latency_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    result.total_seconds = result.latency_seconds;
    result.raw_response = {{"replayed_from", transcript_}};
    return result;
  }

  std::string describe() const override { return "replay " + transcript_; }

 private:
  RecordedAnswer from_records(const AttemptKey& key) const {
    auto it = records_.find(RecordKey{key.problem, key.sample, key.turn});
    if (it == records_.end()) {
      throw ProviderError("replay: no recorded response for " + describe_key(key) + " in " + transcript_);
    }
    return it->second;
  }

  RecordedAnswer from_folder(const AttemptKey& key) const {
    fs::path dir = fs::path(transcript_) / "attempts" / key.problem / ("sample" + std::to_string(key.sample)) /
                   ("turn" + std::to_string(key.turn));
    auto response = read_file(dir / "response.txt");
    if (!response) {
      throw ProviderError("replay: no recorded response for " + describe_key(key) + " in " + transcript_ +
                          " (missing " + (dir / "response.txt").string() + ")");
    }
    return {*response, read_file(dir / "reasoning.txt").value_or("")};
  }

  std::string transcript_;
  bool from_folder_ = false;
  std::map<RecordKey, RecordedAnswer> records_;
};

}  // namespace

std::unique_ptr<LlmProvider> make_replay_provider(const ProviderConfig& config) {
  return std::make_unique<ReplayProvider>(config);
}

}  // namespace kloop
