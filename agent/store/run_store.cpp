// The run folder on disk.
#include "agent/store/run_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "base/untrusted_tree.h"
#include "evaluator/build/builder.h"
#include "evaluator/build/content_hash.h"
#include "evaluator/protocol.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kRecordTag = "kloop-run-record-1";     // run.key runs
constexpr const char* kRecordTagV2 = "kloop-run-record-2";   // the user's key, bound to the run's id
constexpr const char* kSealTag = "kloop-run-seal-1";
constexpr uint64_t kMaxSmallFile = 1u << 20;  // signing.json, seal.json

// The MAC binds a record to the run (its id) and to the file it was written
// to, so a genuine results.jsonl record copied into a rescore file (or
// back), or into another run, is rejected.
std::string record_mac(const IntegrityKey& key, const std::string& run_id, const std::string& file, const json& record) {
  if (run_id.empty()) return key.tag({kRecordTag, file, record.dump()});
  return key.tag({kRecordTagV2, run_id, file, record.dump()});
}
bool record_mac_holds(const IntegrityKey& key, const std::string& run_id, const std::string& file, const json& record,
                      const std::string& mac) {
  if (run_id.empty()) return key.verify(mac, {kRecordTag, file, record.dump()});
  return key.verify(mac, {kRecordTagV2, run_id, file, record.dump()});
}

std::string key_id(const IntegrityKey& key) { return key.tag({"kloop-run-key-id"}).substr(0, 16); }

std::string random_hex(int bytes) {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < bytes; ++i) {
    const unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

// A file of the run's own (never through a link), or nullopt when absent.
std::optional<std::string> read_run_file(const fs::path& p, uint64_t max_bytes) {
  struct stat st {};
  if (lstat(p.c_str(), &st) != 0 && errno == ENOENT) return std::nullopt;
  return read_file_nofollow(p.string(), max_bytes);
}

// "results" of results.jsonl and results.shard-3.jsonl; "" for a name that
// is not a .jsonl file.
std::string record_stem(const std::string& name) {
  const std::string suffix = ".jsonl";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return "";
  std::string stem = name.substr(0, name.size() - suffix.size());
  const std::size_t shard = stem.rfind(".shard-");
  if (shard != std::string::npos) {
    const std::string index = stem.substr(shard + 7);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) return "";
    stem.resize(shard);
  }
  return stem;
}

bool is_record_file(const std::string& name) {
  const std::string stem = record_stem(name);
  return stem == "results" || stem == "stages" || (stem.size() > 8 && stem.rfind("rescore-", 0) == 0);
}

std::string line_list(const std::vector<int>& lines) {
  std::string out;
  for (std::size_t i = 0; i < lines.size() && i < 5; ++i) out += (i ? ", " : "") + std::to_string(lines[i]);
  if (lines.size() > 5) out += ", ...";
  return out;
}

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
            {"verdict", outcome_name(outcome)},
            {"speedup", speedup ? json(*speedup) : json(nullptr)},
            {"message", message},
            {"protocol", protocol},
            {"device", device},
            {"queue", queue},
            {"gpu", gpu},
            {"model", model},
            {"input_tokens", input_tokens},
            {"output_tokens", output_tokens},
            {"reasoning_tokens", reasoning_tokens},
            {"cached_input_tokens", cached_input_tokens},
            {"cache_write_tokens", cache_write_tokens},
            {"provider_attempts", provider_attempts},
            {"cost_usd", cost_usd},
            {"llm_seconds", llm_seconds},
            {"eval_seconds", eval_seconds},
            {"compile_seconds", compile_seconds},
            {"queue_seconds", queue_seconds},
            {"build_cached", build_cached},
            {"finish_reason", finish_reason},
            {"chain_done", chain_done},
            {"stop_reason", stop_reason},
            {"attempt_dir", attempt_dir},
            {"timestamp", timestamp}};
  // Only when there are: records of runs made before stay as they were.
  if (!parents.empty()) {
    json p = json::array();
    for (const auto& a : parents) p.push_back({a.sample, a.turn});
    j["parents"] = p;
  }
  if (!step.empty()) j["step"] = step;
  if (!speedups.empty()) j["speedups"] = speedups;
  return j;
}

AttemptRecord AttemptRecord::from_json(const json& j) {
  AttemptRecord r;
  r.run = j.value("run", "");
  r.problem = j.at("problem").get<std::string>();
  r.level = j.value("level", 0);
  r.sample = j.at("sample").get<int>();
  r.turn = j.at("turn").get<int>();
  const std::string name = j.at("verdict").get<std::string>();
  const std::optional<Outcome> outcome = outcome_from_name(name);
  if (!outcome) {
    throw std::invalid_argument("field \"verdict\": '" + name + "' is no outcome this kloop knows (" +
                                outcome_names() + "); was the run made by a newer kloop?");
  }
  r.outcome = *outcome;
  if (j.contains("speedup") && j["speedup"].is_number()) r.speedup = j["speedup"].get<double>();
  if (j.contains("speedups") && j["speedups"].is_object()) {
    for (const auto& [name, x] : j["speedups"].items()) {
      if (x.is_number()) r.speedups[name] = x.get<double>();
    }
  }
  r.message = j.value("message", "");
  r.protocol = j.value("protocol", "");
  r.device = j.value("device", "");
  r.queue = j.value("queue", 0);
  r.gpu = j.value("gpu", "");
  r.model = j.value("model", "");
  r.input_tokens = j.value("input_tokens", 0LL);
  r.output_tokens = j.value("output_tokens", 0LL);
  r.reasoning_tokens = j.value("reasoning_tokens", 0LL);
  r.cached_input_tokens = j.value("cached_input_tokens", 0LL);
  r.cache_write_tokens = j.value("cache_write_tokens", 0LL);
  r.provider_attempts = j.value("provider_attempts", 0);
  r.cost_usd = j.value("cost_usd", 0.0);
  r.llm_seconds = j.value("llm_seconds", 0.0);
  r.eval_seconds = j.value("eval_seconds", 0.0);
  r.compile_seconds = j.value("compile_seconds", 0.0);
  r.queue_seconds = j.value("queue_seconds", 0.0);
  r.build_cached = j.value("build_cached", false);
  r.finish_reason = j.value("finish_reason", "");
  r.chain_done = j.value("chain_done", false);
  r.stop_reason = j.value("stop_reason", "");
  r.attempt_dir = j.value("attempt_dir", "");
  r.timestamp = j.value("timestamp", "");
  if (j.contains("parents") && j["parents"].is_array()) {
    for (const auto& p : j["parents"]) {
      if (p.is_array() && p.size() == 2 && p[0].is_number_integer() && p[1].is_number_integer()) {
        r.parents.push_back({p[0].get<int>(), p[1].get<int>()});
      }
    }
  }
  r.step = j.value("step", "");
  return r;
}

std::string run_name_problem(const std::string& name) {
  if (name.empty()) return "it is empty";
  if (name.size() > 200) return "it is longer than 200 characters";
  if (name.front() == '/' || name.back() == '/') return "it starts or ends with '/'";
  for (std::size_t from = 0; from <= name.size();) {
    const std::size_t slash = std::min(name.find('/', from), name.size());
    const std::string part = name.substr(from, slash - from);
    if (part.empty() || part == "." || part == "..") return "it has an empty, '.' or '..' part";
    for (char c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' && c != '+' && c != '=') {
        const std::string shown = std::isgraph(static_cast<unsigned char>(c)) ? "'" + std::string(1, c) + "'"
                                  : c == ' '                                   ? "a space"
                                                                               : "a control character";
        return "it holds " + shown + " (letters, digits and . _ - + = only; '/' joins a sweep's parts)";
      }
    }
    from = slash + 1;
  }
  return "";
}

RunStore::RunStore(const std::string& runs_dir, const std::string& name)
    : path_((fs::path(runs_dir) / name).string()), name_(name) {
  if (const std::string why = run_name_problem(name); !why.empty()) {
    throw std::invalid_argument("run name '" + name.substr(0, 200) + "' cannot be used: " + why +
                                "; choose another (--name, or the config's name)");
  }
  fs::create_directories(fs::path(path_) / "attempts");
}

namespace {

// obj's value at a dotted path ("scaffold.kind"); null when absent. `found`,
// when given, says whether every step existed.
json at_path(const json& obj, const std::string& path, bool* found) {
  const json* cur = &obj;
  std::size_t from = 0;
  if (found) *found = true;
  while (true) {
    const std::size_t dot = path.find('.', from);
    const std::string key = path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (!cur->is_object() || !cur->contains(key)) {
      if (found) *found = false;
      return json();
    }
    cur = &(*cur)[key];
    if (dot == std::string::npos) return *cur;
    from = dot + 1;
  }
}

}  // namespace

std::string RunStore::config_conflict(const json& resolved, const std::vector<std::string>& identity_fields) const {
  const fs::path p = fs::path(path_) / "config.json";
  if (!fs::exists(p)) return "";
  json old;
  try {
    std::ifstream(p) >> old;
  } catch (const json::exception&) {
    old = json::object();
  }
  std::string differ;
  int count = 0;
  for (const auto& f : identity_fields) {
    bool in_old = false;
    const json a = at_path(old, f, &in_old);
    const json b = at_path(resolved, f, nullptr);  // the new config has every field
    // A field an older kloop did not store cannot be compared.
    if (!in_old) continue;
    // A protocol's alias names the protocol it stands for (kernelbench, kernelbench-v0.1).
    if (f == "protocol" && a.is_string() && b.is_string() &&
        canonical_protocol_name(a.get<std::string>()) == canonical_protocol_name(b.get<std::string>())) {
      continue;
    }
    if (a != b) differ += std::string(count++ ? "; " : "") + "'" + f + "' (" + a.dump() + " vs " + b.dump() + ")";
  }
  if (!count) return "";
  return p.string() + ": this run was started with a different " + differ +
         (count > 1 ? "; these change" : "; this changes") +
         " its earlier attempts. Use another --name to start a new run (more turns, samples or problems extend a run)";
}

void RunStore::write_config(const json& resolved, const std::vector<std::string>& identity_fields) {
  if (const std::string conflict = config_conflict(resolved, identity_fields); !conflict.empty()) {
    throw std::runtime_error(conflict);
  }
  const fs::path p = fs::path(path_) / "config.json";
  write_text(p.string(), resolved.dump(2) + "\n");
  std::lock_guard<std::mutex> lock(mutex_);
  signing(true);
  // kloop rescore evaluates under this config (its device, seed, isolation).
  seal_files("", {"config.json"});
}

namespace {

// The text a lock file holds: its driver, or "" when cleared.
std::string lock_holder(int fd) {
  std::string text(512, '\0');
  const ssize_t n = pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

std::string shard_lock_name(int shard) { return "lock.shard-" + std::to_string(shard); }

}  // namespace

RunLock::RunLock(const std::string& run_path, std::ostream& notes, std::optional<int> shard)
    : path_((fs::path(run_path) / (shard ? shard_lock_name(*shard) : std::string("lock"))).string()) {
  if (shard) {
    // The run's lock, shared: every shard at once, but no driver of the whole run.
    const std::string run_lock = (fs::path(run_path) / "lock").string();
    run_fd_ = open(run_lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (run_fd_ < 0) throw std::runtime_error(run_lock + ": cannot open the run's lock: " + std::strerror(errno));
    if (flock(run_fd_, LOCK_SH | LOCK_NB) != 0) {
      const std::string who = lock_holder(run_fd_);
      close(run_fd_);
      run_fd_ = -1;
      throw std::runtime_error(run_lock + ": the whole run is in use by " + (who.empty() ? "another kloop" : who) +
                               "; a shard starts once it has finished");
    }
    // Text there was left by a driver of the whole run that died.
    if (!lock_holder(run_fd_).empty()) (void)!ftruncate(run_fd_, 0);
  }
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    if (run_fd_ >= 0) close(run_fd_);
    throw std::runtime_error(path_ + ": cannot open the run's lock: " + std::strerror(err));
  }
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    std::string who = lock_holder(fd_);
    close(fd_);
    fd_ = -1;
    if (run_fd_ >= 0) close(run_fd_);
    run_fd_ = -1;
    if (who.empty() && !shard) who = "the drivers of its shards (lock.shard-*)";
    throw std::runtime_error(path_ + ": the " + std::string(shard ? "shard" : "run") + " is in use by " +
                             (who.empty() ? "another kloop" : who) + "; wait for it to finish, or use another --name");
  }
  // Held by nobody but not cleared: its driver died (kill -9, a crash).
  if (const std::string stale = lock_holder(fd_); !stale.empty()) {
    notes << "kloop: taking over the " << (shard ? "shard's" : "run's") << " lock from " << stale
          << ", which is no longer running\n";
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const std::string me = "pid " + std::to_string(getpid()) + " on host " + host + " since " + when + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    notes << "kloop: warning: cannot write " << path_ << ": " << std::strerror(errno) << "\n";
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) {
    (void)!ftruncate(fd_, 0);  // a clean exit leaves no holder behind
    close(fd_);                // releases the flock
  }
  if (run_fd_ >= 0) close(run_fd_);
}

bool RunLock::shard_running(const std::string& run_path, int shard) {
  const std::string p = (fs::path(run_path) / shard_lock_name(shard)).string();
  const int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = flock(fd, LOCK_SH | LOCK_NB) != 0;
  close(fd);
  return held;
}

bool RunStore::has_records() const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    if (is_record_file(entry.path().filename().string()) && entry.is_regular_file(ec) &&
        entry.file_size(ec) > 0) {
      return true;
    }
  }
  return false;
}

std::string RunStore::user_key_path() {
  if (const char* v = std::getenv("KLOOP_RUN_KEY"); v && *v) return v;
  return (fs::path(BuilderConfig::from_environment().cache_dir) / "run-records.key").string();
}

RunStore::Signing RunStore::signing(bool create) const {
  Signing s;
  const fs::path file = fs::path(path_) / kSigningFile;
  auto read_signing = [&]() -> bool {
    const std::optional<std::string> text = read_run_file(file, kMaxSmallFile);
    if (!text) return false;
    json j;
    try {
      j = json::parse(*text);
    } catch (const json::exception&) {
    }
    if (!j.is_object() || !j.contains("run_id") || !j["run_id"].is_string() || !j.contains("key_id") ||
        !j["key_id"].is_string()) {
      throw std::runtime_error(file.string() + ": not kloop's signing record (expected {\"run_id\": ..., \"key_id\": "
                               "...}); a run whose signing record was changed cannot be trusted: restore it from a "
                               "copy, or start a new run");
    }
    const std::string key_path = user_key_path();
    IntegrityKey key = IntegrityKey::open_or_create(key_path);
    if (key_id(key) != j["key_id"].get<std::string>()) {
      s.unverified = "the run was signed with another run key (id " + j["key_id"].get<std::string>() + ") than " +
                     key_path + " (id " + key_id(key) + "): a run made by another user or machine (KLOOP_RUN_KEY "
                     "names the key to use)";
      return true;
    }
    s.key = std::move(key);
    s.run_id = j["run_id"].get<std::string>();
    return true;
  };
  if (read_signing()) return s;
  const std::string legacy = (fs::path(path_) / kKeyFile).string();
  if (IntegrityKey::exists(legacy)) {
    warn_untrusted(legacy + ": this run's records are signed with a key kept inside the run folder (an older kloop's): "
                   "whoever could write the folder could sign records; new runs keep their key outside it");
    s.key = IntegrityKey::open_or_create(legacy);
    return s;
  }
  // A run with records but no signing predates it: it stays unsigned, so
  // that resuming it does not reject its own earlier records.
  if (!create || has_records()) {
    s.unverified = "the run has no " + std::string(kSigningFile) +
                   " (made before kloop signed its records, or it was removed)";
    return s;
  }
  IntegrityKey key = IntegrityKey::open_or_create(user_key_path());
  const json j = {{"format", 2}, {"run_id", random_hex(16)}, {"key_id", key_id(key)}};
  // Written beside and linked into place: of two drivers starting the run
  // at once (shards), the first one's id stands.
  const std::string tmp = file.string() + ".tmp-" + random_hex(8);
  replace_file(path_, fs::path(tmp).filename().string(), j.dump() + "\n");
  const int linked = link(tmp.c_str(), file.c_str());
  const int link_errno = errno;
  unlink(tmp.c_str());
  if (linked != 0 && link_errno != EEXIST) {
    throw std::runtime_error(file.string() + ": cannot create (" + std::strerror(link_errno) + ")");
  }
  if (!read_signing() || !s.key) throw std::runtime_error(file.string() + ": cannot read back what was just written");
  return s;
}

bool RunStore::verifiable() const {
  const Signing sg = signing(false);
  return sg.key.has_value() && !sg.run_id.empty();
}

std::string RunStore::attempt_path(const std::string& relative) const {
  auto refuse = [&](const std::string& why) {
    return std::runtime_error(path_ + ": the attempt folder '" + relative.substr(0, 300) + "' " + why +
                              "; a record names a folder inside its run (attempts/PROBLEM/sampleK/turnT)");
  };
  if (relative.empty() || relative.front() == '/') throw refuse("is not a path relative to the run");
  fs::path cur = path_;
  std::size_t from = 0;
  for (;;) {
    const std::size_t slash = relative.find('/', from);
    const std::string part = relative.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
    if (part.empty() || part == "." || part == ".." || part.find('\0') != std::string::npos) {
      throw refuse("has an empty, '.' or '..' part");
    }
    cur /= part;
    struct stat st {};
    if (lstat(cur.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) throw refuse("passes through something not a folder (a link?)");
    if (slash == std::string::npos) break;
    from = slash + 1;
  }
  return cur.string();
}

void RunStore::seal_files(const std::string& relative, const std::vector<std::string>& names) const {
  const Signing sg = signing(true);
  if (!sg.key || sg.run_id.empty()) return;  // nothing to sign with (an unsigned or run.key run)
  const std::string dir = relative.empty() ? path_ : attempt_path(relative);
  json files = json::object();
  // Entries sealed before (a folder sealed in steps) stay, when their seal holds.
  if (const std::optional<std::string> text = read_run_file(fs::path(dir) / kSealFile, kMaxSmallFile)) {
    try {
      const json old = json::parse(*text);
      if (sg.key->verify(old.value("mac", ""), {kSealTag, sg.run_id, relative, old.at("files").dump()})) {
        files = old.at("files");
      }
    } catch (const std::exception&) {
    }
  }
  for (const std::string& name : names) {
    const std::optional<std::string> bytes = read_run_file(fs::path(dir) / name, 1ull << 32);
    if (bytes) files[name] = ContentHash().add(*bytes).hex();
  }
  const json seal = {{"files", files}, {"mac", sg.key->tag({kSealTag, sg.run_id, relative, files.dump()})}};
  write_text((fs::path(dir) / kSealFile).string(), seal.dump(2) + "\n");
}

std::string RunStore::read_sealed(const std::string& relative, const std::string& name, uint64_t max_bytes) const {
  const std::string dir = relative.empty() ? path_ : attempt_path(relative);
  const fs::path file = fs::path(dir) / name;
  const std::optional<std::string> bytes = read_run_file(file, max_bytes);
  if (!bytes) throw std::runtime_error(file.string() + ": missing");
  const Signing sg = signing(false);
  if (!sg.key || sg.run_id.empty()) {
    warn_untrusted(path_ + ": files of this run are read unverified: " +
                   (sg.key ? std::string("it was signed with a key inside its folder, before kloop sealed files")
                           : sg.unverified));
    return *bytes;
  }
  const fs::path seal_file = fs::path(dir) / kSealFile;
  json seal;
  try {
    const std::optional<std::string> text = read_run_file(seal_file, kMaxSmallFile);
    if (!text) throw std::runtime_error("missing");
    seal = json::parse(*text);
    if (!sg.key->verify(seal.value("mac", ""), {kSealTag, sg.run_id, relative, seal.at("files").dump()})) {
      throw std::runtime_error("its MAC does not verify");
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(seal_file.string() + ": no seal of the run's driver (" + e.what() + "): " + file.string() +
                             " is not trusted");
  }
  const json& files = seal.at("files");
  if (!files.contains(name) || !files[name].is_string()) {
    throw std::runtime_error(file.string() + ": not sealed by the run's driver (not in " + seal_file.string() + ")");
  }
  if (ContentHash().add(*bytes).hex() != files[name].get<std::string>()) {
    throw std::runtime_error(file.string() + ": differs from what the run's driver wrote (its digest in " +
                             seal_file.string() + ")");
  }
  return *bytes;
}

std::optional<int> RunStore::shard_count() const {
  const fs::path p = fs::path(path_) / "shards.json";
  std::ifstream in(p);
  if (!in) return std::nullopt;
  try {
    const json j = json::parse(in);
    return j.at("shards").get<int>();
  } catch (const json::exception&) {
    throw std::runtime_error(p.string() + ": not a shard count (expected {\"shards\": N}); remove it if the run "
                             "is not being run in shards");
  }
}

void RunStore::check_shard_count(int count) {
  if (const std::optional<int> have = shard_count()) {
    if (*have != count) {
      throw std::runtime_error((fs::path(path_) / "shards.json").string() + ": this run is split into " +
                               std::to_string(*have) + " shards (a problem's shard depends on the number); use --shards " +
                               std::to_string(*have) + ", or another --name for a new run");
    }
    return;
  }
  write_text((fs::path(path_) / "shards.json").string(), json{{"shards", count}}.dump() + "\n");
}

std::string RunStore::shard_file(const std::string& file, int index) {
  const std::string suffix = ".jsonl";
  const std::string stem =
      file.size() > suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0
          ? file.substr(0, file.size() - suffix.size())
          : file;
  return stem + ".shard-" + std::to_string(index) + suffix;
}

std::vector<std::string> RunStore::record_files(const std::string& file) const {
  std::vector<std::string> out;
  std::error_code ec;
  if (fs::is_regular_file(fs::path(path_) / file, ec)) out.push_back(file);
  const std::string stem = record_stem(file);
  std::vector<std::pair<long long, std::string>> shards;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == file || record_stem(name) != stem || name.find(".shard-") == std::string::npos) continue;
    if (!entry.is_regular_file(ec)) continue;
    const std::string index = name.substr(name.rfind(".shard-") + 7);
    shards.emplace_back(std::stoll(index.substr(0, index.size() - 6)), name);
  }
  std::sort(shards.begin(), shards.end());
  for (auto& [index, name] : shards) out.push_back(std::move(name));
  return out;
}

std::vector<json> RunStore::load_lines(const std::string& file) const {
  std::vector<json> out;
  const Signing sg = signing(false);
  const std::optional<IntegrityKey>& key = sg.key;
  for (const std::string& name : record_files(file)) {
    const fs::path p = fs::path(path_) / name;
    std::ifstream in(p);
    if (!in) continue;
    std::vector<int> rejected;
    int line_number = 0, unverified = 0;
    std::string line;
    while (std::getline(in, line)) {
      ++line_number;
      if (line.empty()) continue;
      json j = json::parse(line, nullptr, false);
      // A line cut short by a kill: what it held is redone.
      if (!j.is_object()) continue;
      std::string mac;
      if (j.contains("mac") && j["mac"].is_string()) {
        mac = j["mac"].get<std::string>();
        j.erase("mac");
      }
      // Under the name of the file it is in: a record moved to another
      // shard's file or another protocol's does not verify.
      if (key && (mac.empty() || !record_mac_holds(*key, sg.run_id, name, j, mac))) {
        rejected.push_back(line_number);
        continue;
      }
      unverified += key ? 0 : 1;
      j["_file"] = name;
      j["_line"] = line_number;
      out.push_back(std::move(j));
    }
    if (!rejected.empty()) {
      warn_untrusted(p.string() + ": " + std::to_string(rejected.size()) + " of " + std::to_string(line_number) +
                     " line(s) rejected: not written by this run's driver (missing or wrong MAC under " +
                     (sg.run_id.empty() ? (fs::path(path_) / kKeyFile).string() : user_key_path()) + "; line " +
                     line_list(rejected) + ")");
    }
    if (unverified > 0) {
      warn_untrusted(p.string() + ": " + std::to_string(unverified) + " record(s) unverified: " + sg.unverified);
    }
  }
  return out;
}

std::vector<AttemptRecord> RunStore::load_results(const std::string& file) const {
  std::vector<AttemptRecord> out;
  std::set<std::tuple<std::string, int, int>> seen;
  for (json& j : load_lines(file)) {
    const std::string where = (fs::path(path_) / j["_file"].get<std::string>()).string() + ":" +
                              std::to_string(j["_line"].get<int>());
    j.erase("_file");
    j.erase("_line");
    try {
      AttemptRecord r = AttemptRecord::from_json(j);
      if (seen.insert({r.problem, r.sample, r.turn}).second) out.push_back(std::move(r));
    } catch (const json::exception&) {
      // A whole line that is no record (fields missing): redone.
    } catch (const std::invalid_argument& e) {
      // A whole, signed line this kloop cannot read: redoing its attempt
      // would spend again what was spent on it.
      throw std::runtime_error(where + ": " + e.what());
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
  // Drivers on other nodes may write the same file (a run's shards, each
  // its config.json): each its own temporary file, renamed over atomically.
  static const std::string unique = [] {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    return std::string(host) + "-" + std::to_string(getpid());
  }();
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp-" + unique + "-" + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error(path + ": cannot write");
  }
  fs::rename(tmp, path);
}

void RunStore::append(const AttemptRecord& record, const std::string& to) {
  append_line(json::parse(record.to_json().dump()), to);  // the fields as they will read back
}

void RunStore::append_line(const json& record, const std::string& to) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string file = shard_ ? shard_file(to, *shard_) : to;
  const std::string p = (fs::path(path_) / file).string();
  json signed_record = record;
  const Signing sg = signing(true);
  if (sg.key) {
    signed_record["mac"] = record_mac(*sg.key, sg.run_id, file, signed_record);
  } else if (IntegrityKey::exists((fs::path(path_) / kSigningFile).string())) {
    // Signed under a key this user does not hold: an unsigned record among
    // its signed ones would be taken for a forgery (or hide one).
    throw std::runtime_error(path_ + ": cannot add records: " + sg.unverified);
  }
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
  line += signed_record.dump() + "\n";
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
