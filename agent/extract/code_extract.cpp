// Fence scanning for code extraction (``` and ~~~ fences, any info string).
#include "agent/extract/code_extract.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace kloop {
namespace {

struct Block {
  std::string tag;
  std::string body;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<Block> fenced_blocks(const std::string& text, bool* saw_fence) {
  std::vector<Block> blocks;
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  std::string fence;
  Block current;
  while (std::getline(in, line)) {
    std::string t = trim(line);
    if (!inside) {
      if (t.rfind("```", 0) == 0 || t.rfind("~~~", 0) == 0) {
        *saw_fence = true;
        inside = true;
        fence = t.substr(0, 3);
        current = Block{lower(trim(t.substr(3))), ""};
      }
    } else if (t.rfind(fence, 0) == 0 && trim(t.substr(3)).empty()) {
      inside = false;
      blocks.push_back(current);
    } else {
      current.body += line + "\n";
    }
  }
  if (inside && !current.body.empty()) blocks.push_back(current);  // an unterminated last block
  return blocks;
}

bool defines_model_new(const std::string& code) {
  return code.find("ModelNew") != std::string::npos;
}

}  // namespace

ExtractedCode extract_code(const std::string& response, bool python) {
  bool saw_fence = false;
  std::vector<Block> blocks = fenced_blocks(response, &saw_fence);
  static const std::vector<std::string> kCpp = {"cpp", "c++", "cuda", "cu", "cxx", "cc"};
  static const std::vector<std::string> kPython = {"python", "py", "python3"};
  const std::vector<std::string>& tags = python ? kPython : kCpp;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    std::string tag = it->tag.substr(0, it->tag.find_first_of(" \t{"));
    if (std::find(tags.begin(), tags.end(), tag) != tags.end()) return {true, it->body, "fenced:" + tag};
  }
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    if (defines_model_new(it->body)) return {true, it->body, "fenced:ModelNew"};
  }
  const char* whole_text_mark = python ? "import torch" : "KLOOP_REGISTER_CANDIDATE";
  if (!saw_fence && defines_model_new(response) && response.find(whole_text_mark) != std::string::npos) {
    return {true, response, "unfenced"};
  }
  return {};
}

}  // namespace kloop
