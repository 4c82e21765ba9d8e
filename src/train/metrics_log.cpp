#include "train/metrics_log.h"

#include <sys/resource.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "util/error.h"

namespace sg {
namespace {

// fmt's default format is the shortest text that parses back to the same float or double.
template <typename Float>
std::string json_number(Float v) {
  if (!std::isfinite(v)) return "null";  // JSON has no NaN/Inf; a diverged loss reads as null
  return fmt::format("{}", v);
}

}  // namespace

MetricsLog::MetricsLog(const std::string& run_dir, int64_t resume_step, int64_t total_steps,
                       std::string unit)
    : path_(run_dir + "/metrics.jsonl"), total_steps_(total_steps), unit_(std::move(unit)) {
  if (resume_step > 0 && std::filesystem::exists(path_)) {
    std::ifstream in(path_);
    std::string kept, line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.contains("step") || !j["step"].is_number_integer()) continue;
      if (j["step"].get<int64_t>() <= resume_step) kept += line + "\n";
    }
    in.close();
    // Replace the file atomically: a crash here must not lose the history.
    const std::string temp = path_ + ".tmp";
    std::ofstream out(temp, std::ios::trunc);
    out << kept;
    out.close();
    if (!out) throw RunError(temp + ": cannot write; check the disk space and log.dir");
    std::filesystem::rename(temp, path_);
  }
  file_ = std::fopen(path_.c_str(), resume_step > 0 ? "a" : "w");
  if (file_ == nullptr) {
    throw RunError(path_ + ": cannot open for writing; check that log.dir is writable");
  }
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::log_step(const StepMetrics& m, bool print) {
  const std::string scaling =
      m.loss_scale > 0 ? fmt::format(", \"loss_scale\": {}, \"skipped\": {}",
                                     json_number(static_cast<double>(m.loss_scale)),
                                     m.skipped ? "true" : "false")
                       : std::string();
  fmt::print(file_,
             "{{\"step\": {}, \"loss\": {}, \"lr\": {}, \"grad_norm\": {}, \"step_ms\": {}, "
             "\"{}_per_s\": {}, \"mfu\": {}, \"peak_mem_bytes\": {}{}}}\n",
             m.step, json_number(m.loss), json_number(m.lr), json_number(m.grad_norm),
             json_number(m.step_ms), unit_, json_number(m.throughput), json_number(m.mfu),
             m.peak_mem_bytes, scaling);
  std::fflush(file_);
  if (print) {
    const std::string per = unit_ == "tokens" ? "tok" : unit_ == "images" ? "img" : unit_;
    fmt::print("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} ms | {:.{}f} {}/s "
               "| mfu {:.1f}% | mem {:.0f} MiB\n",
               m.step, std::to_string(total_steps_).size(), total_steps_, m.loss, m.lr,
               m.grad_norm, m.step_ms, m.throughput, m.throughput < 100 ? 1 : 0, per,
               100.0 * m.mfu, m.peak_mem_bytes / 1048576.0);
    if (m.skipped) {
      fmt::print("step {}: fp16 gradients overflowed at loss scale {}; update skipped, scale "
                 "halved\n",
                 m.step, static_cast<double>(m.loss_scale));
    }
    std::fflush(stdout);
  }
}

void MetricsLog::log_eval(int64_t step, float val_loss, double best_possible,
                          const std::vector<std::pair<std::string, double>>& metrics) {
  std::string extra_json, extra_text;
  for (const auto& [name, value] : metrics) {
    extra_json += fmt::format(", \"{}\": {}", name, json_number(value));
    extra_text += fmt::format(" | {} {:.4f}", name, value);
  }
  fmt::print(file_, "{{\"step\": {}, \"val_loss\": {}{}}}\n", step, json_number(val_loss),
             extra_json);
  std::fflush(file_);
  if (best_possible >= 0) {
    fmt::print("eval step {} | val loss {:.4f} | best possible {:.4f} (gap {:.4f}){}\n", step,
               val_loss, best_possible, val_loss - best_possible, extra_text);
  } else {
    fmt::print("eval step {} | val loss {:.4f}{}\n", step, val_loss, extra_text);
  }
  std::fflush(stdout);
}

void MetricsLog::log_message(const std::string& line) {
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace sg
