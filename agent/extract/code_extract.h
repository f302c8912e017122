// Finds the candidate source in a model's response.
#pragma once

#include <string>

namespace kloop {

struct ExtractedCode {
  bool found = false;
  std::string code;
  std::string method;  // "fenced:cpp", "fenced:ModelNew", "unfenced", or "" when not found
};

// C++ (`python` false): the last fenced block tagged cpp/cuda/c++/cu/cxx;
// else the last fenced block that defines ModelNew; else, with no fences at
// all, the whole text when it defines and registers ModelNew.
// KernelBench's Python format (`python` true): the same with python/py tags,
// and unfenced text that defines class ModelNew and imports torch.
ExtractedCode extract_code(const std::string& response, bool python = false);

}  // namespace kloop
