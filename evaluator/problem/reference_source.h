// The identity of a KernelBench reference file, from its source: which task
// a published kernel was written against, whatever KernelBench version it
// came from. Two versions of one task differ in their module-level sizes,
// their comments and docstrings, their formatting; another task at the same
// number (level 1's 50 was a product reduction, 97 a cosine-similarity loss)
// differs in its Model. So the task's identity is its Model: the file's
// classes and functions other than get_inputs and get_init_inputs, as
// logical lines of tokens (no comment, docstring, blank line or spacing),
// hashed; get_inputs and get_init_inputs hash apart, so a version that draws
// its inputs otherwise is the same task with a note. Specs record the model
// hash of the upstream file each port follows (provenance.reference_hash).
#pragma once

#include <string>

namespace kloop {

struct ReferenceIdentity {
  std::string model_hash;   // 16 hex digits of SHA-256 of the normalised Model
  std::string inputs_hash;  // the same of get_inputs and get_init_inputs
  std::string model_text;   // what model_hash hashes (for a diff when two differ)
};

// Never throws: a file that is not Python still has an identity (which
// matches no task's).
ReferenceIdentity reference_identity(const std::string& python_source);

}  // namespace kloop
