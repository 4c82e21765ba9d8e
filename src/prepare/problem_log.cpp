#include "prepare/problem_log.h"

#include <cstdio>

namespace sg {

void ProblemLog::report(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++count_;
  if (first_.size() < kKept) first_.push_back(message);
  if (!print_) return;
  if (count_ <= static_cast<int64_t>(kKept)) {
    std::fprintf(stderr, "\rwarning: %s\n", message.c_str());
  } else if (count_ == static_cast<int64_t>(kKept) + 1) {
    std::fprintf(stderr, "\rwarning: more problems; only their number is reported from now on\n");
  }
}

int64_t ProblemLog::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_;
}

std::vector<std::string> ProblemLog::first() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return first_;
}

}  // namespace sg
