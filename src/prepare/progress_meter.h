#pragma once
// Progress of `prepare` on stderr: input read (of the total, when known), text and token
// throughput, documents, tokens and an ETA from the input fraction. Redrawn in place about once
// a second on a terminal; one line every 10 s otherwise (logs, tests), so it never floods.
// The reader calls set_input_done, the writer's thread add_output: both are thread-safe.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace sg {

class ProgressMeter {
 public:
  // input_total: bytes of input (compressed size for archives), 0 when unknown.
  ProgressMeter(std::string label, int64_t input_total, bool enabled);

  void set_input_done(int64_t bytes);
  void add_output(int64_t documents, int64_t text_bytes, int64_t tokens);
  // Prints the final line (always, when enabled) with the averages over the whole run.
  void finish();

  int64_t documents() const { return documents_; }
  int64_t text_bytes() const { return text_bytes_; }
  int64_t tokens() const { return tokens_; }
  double seconds() const;

 private:
  void maybe_print();
  std::string line() const;

  std::string label_;
  int64_t input_total_;
  bool enabled_, terminal_;
  std::chrono::steady_clock::time_point start_, last_print_;
  std::atomic<int64_t> input_done_{0}, documents_{0}, text_bytes_{0}, tokens_{0};
  std::mutex print_mutex_;
};

// "1.5 GB", "12.0 MB", "640 B"
std::string human_bytes(double bytes);

}  // namespace sg
