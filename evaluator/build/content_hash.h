// SHA-256 content hashes for cache keys.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kloop {

// Incremental SHA-256; parts are length-prefixed so ("ab","c") != ("a","bc").
class ContentHash {
 public:
  ContentHash();
  ~ContentHash();
  ContentHash(const ContentHash&) = delete;
  ContentHash& operator=(const ContentHash&) = delete;
  ContentHash& add(std::string_view part);
  ContentHash& add_file(const std::string& path);  // throws when unreadable
  // A part of `size` bytes read from `fd` as it goes (what add() of those
  // bytes gives, without holding them); false when fewer could be read.
  bool add_fd(int fd, uint64_t size);
  std::string hex();                               // finishes the hash

 private:
  void* ctx_;
};

std::string read_file(const std::string& path);  // throws std::runtime_error naming the file

}  // namespace kloop
