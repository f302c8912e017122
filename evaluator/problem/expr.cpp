// Recursive-descent evaluator for spec expressions. Grammar:
//   sum := product (('+'|'-') product)*
//   product := power (('*'|'/'|'%') power)*
//   power := unary ('^' power)?        (also "**")
//   unary := '-' unary | atom
//   atom := number | name | name '(' args ')' | '(' sum ')'
#include "evaluator/problem/expr.h"

#include <cctype>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace kloop {
namespace {

class Parser {
 public:
  Parser(const std::string& text, const DimValues& dims) : text_(text), dims_(dims) {}

  double parse() {
    double v = sum();
    skip_space();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("in expression \"" + text_ + "\" at column " +
                                std::to_string(pos_ + 1) + ": " + what);
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  double sum() {
    double v = product();
    for (;;) {
      if (eat('+')) {
        v += product();
      } else if (eat('-')) {
        v -= product();
      } else {
        return v;
      }
    }
  }

  double product() {
    double v = power();
    for (;;) {
      skip_space();
      if (pos_ + 1 < text_.size() && text_[pos_] == '*' && text_[pos_ + 1] == '*') return v;
      if (eat('*')) {
        v *= power();
      } else if (eat('/')) {
        double d = power();
        if (d == 0) fail("division by zero");
        v /= d;
      } else if (eat('%')) {
        double d = power();
        if (d == 0) fail("modulo by zero");
        v = std::fmod(v, d);
      } else {
        return v;
      }
    }
  }

  double power() {
    double base = unary();
    skip_space();
    if (eat('^')) return std::pow(base, power());
    if (pos_ + 1 < text_.size() && text_[pos_] == '*' && text_[pos_ + 1] == '*') {
      pos_ += 2;
      return std::pow(base, power());
    }
    return base;
  }

  double unary() {
    if (eat('-')) return -unary();
    if (eat('+')) return unary();
    return atom();
  }

  double atom() {
    skip_space();
    if (pos_ >= text_.size()) fail("expression ends early");
    char c = text_[pos_];
    if (eat('(')) {
      double v = sum();
      if (!eat(')')) fail("missing ')'");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      std::size_t used = 0;
      double v = std::stod(text_.substr(pos_), &used);
      pos_ += used;
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        ++pos_;
      }
      std::string name = text_.substr(start, pos_ - start);
      if (eat('(')) return call(name);
      auto it = dims_.find(name);
      if (it == dims_.end()) {
        std::string known;
        for (const auto& [k, v] : dims_) known += (known.empty() ? "" : ", ") + k;
        pos_ = start;
        fail("unknown dim '" + name + "' (known: " + known + ")");
      }
      return static_cast<double>(it->second);
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  double call(const std::string& name) {
    std::vector<double> args;
    if (!eat(')')) {
      do {
        args.push_back(sum());
      } while (eat(','));
      if (!eat(')')) fail("missing ')' after arguments of " + name);
    }
    auto need = [&](std::size_t n) {
      if (args.size() != n) fail(name + "() takes " + std::to_string(n) + " argument(s)");
    };
    if (name == "min") return need(2), std::min(args[0], args[1]);
    if (name == "max") return need(2), std::max(args[0], args[1]);
    if (name == "ceil") return need(1), std::ceil(args[0]);
    if (name == "floor") return need(1), std::floor(args[0]);
    if (name == "sqrt") return need(1), std::sqrt(args[0]);
    if (name == "log2") return need(1), std::log2(args[0]);
    fail("unknown function " + name + "() (known: min, max, ceil, floor, sqrt, log2)");
  }

  const std::string& text_;
  const DimValues& dims_;
  std::size_t pos_ = 0;
};

}  // namespace

double eval_expr(const std::string& text, const DimValues& dims) {
  return Parser(text, dims).parse();
}

long long eval_int_expr(const std::string& text, const DimValues& dims) {
  double v = eval_expr(text, dims);
  double r = std::round(v);
  if (std::fabs(v - r) > 1e-9 * std::max(1.0, std::fabs(v))) {
    throw std::invalid_argument("expression \"" + text + "\" is " + std::to_string(v) +
                                ", expected an integer");
  }
  return static_cast<long long>(r);
}

}  // namespace kloop
