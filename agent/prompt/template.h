// PromptTemplate: plain-text prompt files with {{name}} placeholders and
// {{#name}}...{{/name}} sections that render only when `name` is non-empty.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

namespace kloop {

using TemplateValues = std::map<std::string, std::string>;

class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Renders `text`; `origin` (a file name) appears in errors. A placeholder
// without a value is an error naming it, so a typo in a prompt file cannot
// silently drop content.
std::string render_template(const std::string& text, const TemplateValues& values, const std::string& origin);

// Cuts `text` to at most max_chars, keeping the head and the tail and saying
// how much was left out in between.
std::string cap_text(const std::string& text, std::size_t max_chars);

}  // namespace kloop
