#include "evaluator/problem/reference_source.h"

#include <cctype>
#include <vector>

#include "evaluator/build/content_hash.h"

namespace kloop {
namespace {

struct Token {
  std::string text;
  bool word = false;    // an identifier, keyword or number
  bool string = false;  // a string literal, prefix and quotes included
};

struct LogicalLine {
  int indent = 0;  // columns (a tab to the next multiple of 8)
  std::vector<Token> tokens;
};

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool string_prefix(const std::string& w) {
  std::string l;
  for (char c : w) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l == "r" || l == "b" || l == "u" || l == "f" || l == "rb" || l == "br" || l == "fr" || l == "rf";
}

// Python's logical lines: comments and blank lines dropped, lines joined
// inside brackets and after a backslash, strings (triple-quoted ones over
// several lines) kept whole as one token each.
std::vector<LogicalLine> logical_lines(const std::string& s) {
  std::vector<LogicalLine> lines;
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    // The start of a physical line outside any bracket: its indentation.
    int indent = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f')) {
      indent = s[i] == '\t' ? (indent / 8 + 1) * 8 : s[i] == ' ' ? indent + 1 : 0;
      ++i;
    }
    LogicalLine line;
    line.indent = indent;
    int depth = 0;
    while (i < n) {
      const char c = s[i];
      if (c == '#') {
        while (i < n && s[i] != '\n') ++i;
        continue;
      }
      if (c == '\\' && i + 1 < n && (s[i + 1] == '\n' || s[i + 1] == '\r')) {
        i += s[i + 1] == '\r' && i + 2 < n && s[i + 2] == '\n' ? 3 : 2;
        continue;
      }
      if (c == '\n' || c == '\r') {
        ++i;
        if (depth > 0) continue;
        break;
      }
      if (c == ' ' || c == '\t' || c == '\f') {
        ++i;
        continue;
      }
      std::string prefix;
      if (word_char(c)) {
        std::size_t j = i;
        while (j < n && word_char(s[j])) ++j;
        std::string w = s.substr(i, j - i);
        if (j < n && (s[j] == '\'' || s[j] == '"') && string_prefix(w)) {
          prefix = w;
          i = j;
        } else {
          line.tokens.push_back({w, true, false});
          i = j;
          continue;
        }
      }
      const char q = s[i];
      if (q == '\'' || q == '"') {
        const bool triple = i + 2 < n && s[i + 1] == q && s[i + 2] == q;
        const std::size_t start = i;
        i += triple ? 3 : 1;
        while (i < n) {
          if (s[i] == '\\') {
            i += 2;
            continue;
          }
          if (!triple && (s[i] == '\n' || s[i] == q)) {
            if (s[i] == q) ++i;
            break;
          }
          if (triple && s[i] == q && i + 2 < n && s[i + 1] == q && s[i + 2] == q) {
            i += 3;
            break;
          }
          ++i;
        }
        line.tokens.push_back({prefix + s.substr(start, std::min(i, n) - start), false, true});
        continue;
      }
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      line.tokens.push_back({std::string(1, c), false, false});
      ++i;
    }
    if (!line.tokens.empty()) lines.push_back(std::move(line));
  }
  return lines;
}

// One logical line as text: tokens side by side, a space only between two
// words (so `a  +  b` and `a+b`, `f(x, y)` and `f(x,y)` read alike).
std::string line_text(const LogicalLine& l, int depth) {
  std::string out(static_cast<std::size_t>(depth) * 4, ' ');
  for (std::size_t k = 0; k < l.tokens.size(); ++k) {
    if (k && l.tokens[k - 1].word && l.tokens[k].word) out += ' ';
    out += l.tokens[k].text;
  }
  return out + "\n";
}

std::string short_hash(const std::string& text) {
  ContentHash h;
  h.add(text);
  return h.hex().substr(0, 16);
}

}  // namespace

ReferenceIdentity reference_identity(const std::string& python_source) {
  enum class Part { kNone, kModel, kInputs };
  std::string model, inputs;
  std::vector<int> indents = {0};
  Part part = Part::kNone;
  for (const LogicalLine& l : logical_lines(python_source)) {
    bool docstring = true;
    for (const Token& t : l.tokens) docstring = docstring && t.string;
    while (indents.size() > 1 && l.indent < indents.back()) indents.pop_back();
    if (l.indent > indents.back()) indents.push_back(l.indent);
    const int depth = static_cast<int>(indents.size()) - 1;
    if (depth == 0) {
      // A top-level statement opens a part: a class or function is the
      // Model (a decorator goes with what it decorates); get_inputs and
      // get_init_inputs are the inputs; imports and sizes are neither.
      const std::string& first = l.tokens.front().text;
      const std::string second = l.tokens.size() > 1 ? l.tokens[1].text : "";
      if (first == "def" && (second == "get_inputs" || second == "get_init_inputs")) {
        part = Part::kInputs;
      } else if (first == "class" || first == "def" || first == "async" || first == "@") {
        part = Part::kModel;
      } else {
        part = Part::kNone;
      }
    }
    if (docstring || part == Part::kNone) continue;
    (part == Part::kModel ? model : inputs) += line_text(l, depth);
  }
  return {short_hash(model), short_hash(inputs), model};
}

}  // namespace kloop
