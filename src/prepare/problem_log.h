#pragma once
// Problems met while preparing a dataset that do not stop it: an undecodable archive member, a
// JSONL line without "text", invalid UTF-8 that was repaired. Each is one line naming the file
// and offset; the first ones go to stderr as they happen and into dataset.json, all are counted.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace sg {

class ProblemLog {
 public:
  explicit ProblemLog(bool print = true) : print_(print) {}
  void report(const std::string& message);  // thread-safe
  int64_t count() const;
  std::vector<std::string> first() const;   // the first kKept messages

  static constexpr size_t kKept = 50;

 private:
  bool print_;
  mutable std::mutex mutex_;
  int64_t count_ = 0;
  std::vector<std::string> first_;
};

}  // namespace sg
