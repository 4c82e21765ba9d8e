#include "prepare/progress_meter.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace sg {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000 && u < 4) {
    bytes /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

namespace {

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1e4) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string human_duration(double s) {
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

}  // namespace

ProgressMeter::ProgressMeter(std::string label, int64_t input_total, bool enabled)
    : label_(std::move(label)),
      input_total_(input_total),
      enabled_(enabled),
      terminal_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

double ProgressMeter::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressMeter::set_input_done(int64_t bytes) {
  input_done_ = bytes;
  maybe_print();
}

void ProgressMeter::add_output(int64_t documents, int64_t text_bytes, int64_t tokens) {
  documents_ += documents;
  text_bytes_ += text_bytes;
  tokens_ += tokens;
  maybe_print();
}

std::string ProgressMeter::line() const {
  const double s = std::max(seconds(), 1e-9);
  std::string out = label_ + ": ";
  const double done = static_cast<double>(input_done_.load());
  if (input_total_ > 0) {
    out += fmt::format("{} of {} ({:.0f}%), ", human_bytes(done), human_bytes(input_total_),
                       100.0 * done / input_total_);
  }
  out += fmt::format("{} docs, {} tokens, {}/s text, {} tokens/s", human_count(documents_),
                     human_count(tokens_), human_bytes(text_bytes_ / s), human_count(tokens_ / s));
  if (input_total_ > 0 && done > 0 && done < input_total_)
    out += ", ETA " + human_duration(s * (input_total_ - done) / done);
  return out;
}

void ProgressMeter::maybe_print() {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(print_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (now - last_print_ < std::chrono::seconds(terminal_ ? 1 : 10)) return;
  last_print_ = now;
  std::fprintf(stderr, terminal_ ? "\r%s\033[K" : "%s\n", line().c_str());
}

void ProgressMeter::finish() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(print_mutex_);
  std::fprintf(stderr, terminal_ ? "\r%s in %s\033[K\n" : "%s in %s\n", line().c_str(),
               human_duration(seconds()).c_str());
}

}  // namespace sg
