// A deliberately small template language: substitution and one level of
// optional sections is all prompt files need.
#include "agent/prompt/template.h"

#include <algorithm>

namespace kloop {

std::string cap_text(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) return text;
  const std::string marker = "\n[... " + std::to_string(text.size() - max_chars) + " characters left out ...]\n";
  if (max_chars <= marker.size() + 2) return text.substr(0, max_chars);
  std::size_t keep = max_chars - marker.size();
  std::size_t head = keep * 2 / 3;
  return text.substr(0, head) + marker + text.substr(text.size() - (keep - head));
}

std::string render_template(const std::string& text, const TemplateValues& values, const std::string& origin) {
  std::string out;
  std::size_t pos = 0;
  auto line_of = [&](std::size_t at) {
    return std::to_string(1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
  };
  while (pos < text.size()) {
    std::size_t open = text.find("{{", pos);
    if (open == std::string::npos) {
      out += text.substr(pos);
      break;
    }
    out += text.substr(pos, open - pos);
    std::size_t close = text.find("}}", open);
    if (close == std::string::npos) throw TemplateError(origin + ":" + line_of(open) + ": '{{' without '}}'");
    std::string tag = text.substr(open + 2, close - open - 2);
    if (!tag.empty() && tag[0] == '#') {
      const std::string name = tag.substr(1);
      const std::string end_tag = "{{/" + name + "}}";
      std::size_t end = text.find(end_tag, close);
      if (end == std::string::npos) throw TemplateError(origin + ":" + line_of(open) + ": section '" + name + "' has no " + end_tag);
      auto it = values.find(name);
      if (it == values.end()) throw TemplateError(origin + ":" + line_of(open) + ": no value for section '" + name + "'");
      if (!it->second.empty()) out += render_template(text.substr(close + 2, end - close - 2), values, origin);
      pos = end + end_tag.size();
      continue;
    }
    auto it = values.find(tag);
    if (it == values.end()) {
      std::string known;
      for (const auto& [k, v] : values) known += (known.empty() ? "" : ", ") + k;
      throw TemplateError(origin + ":" + line_of(open) + ": unknown placeholder {{" + tag + "}} (known: " + known + ")");
    }
    out += it->second;
    pos = close + 2;
  }
  return out;
}

}  // namespace kloop
