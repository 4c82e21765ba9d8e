#include "train/metrics_log.h"

#include <sys/resource.h>

#include <cmath>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "train/tensorboard_writer.h"
#include "util/error.h"

namespace sg {
namespace {

// fmt's default format is the shortest text that parses back to the same float or double.
template <typename Float>
std::string json_number(Float v) {
  if (!std::isfinite(v)) return "null";  // JSON has no NaN/Inf; a diverged loss reads as null
  return fmt::format("{}", v);
}

// The run's log on standard output (a file, under Slurm or a sweep): a failed write stops the
// run as metrics.jsonl's does.
void flush_stdout() {
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int error = errno;
  std::clearerr(stdout);
  throw RunError(std::string("standard output: cannot write the run's log (") +
                 std::strerror(error) +
                 "); the run stops here. Free space where the output goes and run the job again: "
                 "it continues from its last checkpoint (checkpoint.resume: auto)");
}

}  // namespace

MetricsLog::MetricsLog(const std::string& run_dir, int64_t resume_step, int64_t total_steps,
                       std::string unit, bool tensorboard)
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
  // A resumed run's data starts after its checkpoint; a fresh one's at 0 (the evaluation before
  // the first step), superseding what earlier event files hold from there on.
  if (tensorboard) {
    tensorboard_ =
        std::make_unique<TensorBoardWriter>(run_dir + "/tb", resume_step > 0 ? resume_step + 1 : 0);
  }
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::write_line(int64_t step, const std::vector<Field>& fields) {
  std::string line = fmt::format("{{\"step\": {}", step);
  ScalarValues scalars;
  for (const Field& field : fields) {
    line += fmt::format(", \"{}\": {}", field.key, field.json);
    scalars.emplace_back(field.key, field.value);
  }
  line += "}\n";
  // A full disk must stop the run at once, not after hours without metrics: stdio buffers, so
  // only the flush tells.
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    throw RunError(path_ + ": cannot write (" + std::strerror(errno) +
                   "); the run stops here. Free space in log.dir and run the job again: it "
                   "continues from its last checkpoint (checkpoint.resume: auto)");
  }
  if (tensorboard_) tensorboard_->write_scalars(step, scalars);
}

void MetricsLog::log_step(const StepMetrics& m, bool print) {
  std::vector<Field> fields = {
      {"loss", json_number(m.loss), m.loss},
      {"lr", json_number(m.lr), m.lr},
      {"grad_norm", json_number(m.grad_norm), m.grad_norm},
      {"step_ms", json_number(m.step_ms), m.step_ms},
      {unit_ + "_per_s", json_number(m.throughput), m.throughput},
      {"mfu", json_number(m.mfu), m.mfu},
      {"peak_mem_bytes", std::to_string(m.peak_mem_bytes), static_cast<double>(m.peak_mem_bytes)},
  };
  if (m.loss_scale > 0) {
    const double scale = m.loss_scale;
    fields.push_back({"loss_scale", json_number(scale), scale});
  }
  if (m.loss_scale > 0 || m.skipped_steps > 0) {
    fields.push_back({"skipped", m.skipped ? "true" : "false", m.skipped ? 1.0 : 0.0});
    fields.push_back(
        {"skipped_steps", std::to_string(m.skipped_steps), static_cast<double>(m.skipped_steps)});
  }
  write_line(m.step, fields);
  if (print) {
    const std::string per = unit_ == "tokens" ? "tok" : unit_ == "images" ? "img" : unit_;
    fmt::print("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} ms | {:.{}f} {}/s "
               "| mfu {:.1f}% | mem {:.0f} MiB\n",
               m.step, std::to_string(total_steps_).size(), total_steps_, m.loss, m.lr,
               m.grad_norm, m.step_ms, m.throughput, m.throughput < 100 ? 1 : 0, per,
               100.0 * m.mfu, m.peak_mem_bytes / 1048576.0);
    if (m.skipped && m.overflow) {
      fmt::print("step {}: fp16 gradients overflowed at loss scale {}; update skipped, scale "
                 "halved\n",
                 m.step, static_cast<double>(m.loss_scale));
    } else if (m.skipped) {
      fmt::print("step {}: loss or gradients not finite (loss {}, norm {}); update skipped, "
                 "weights unchanged ({} skipped in all, {} in a row; the run stops at {} in a "
                 "row, train.max_skipped_steps)\n",
                 m.step, m.loss, m.grad_norm, m.skipped_steps, m.skipped_in_row,
                 m.max_skipped_in_row);
    }
    flush_stdout();
  }
}

void MetricsLog::log_eval(int64_t step, float val_loss, double best_possible,
                          const std::vector<std::pair<std::string, double>>& metrics) {
  std::vector<Field> fields = {{"val_loss", json_number(val_loss), val_loss}};
  std::string extra_text;
  for (const auto& [name, value] : metrics) {
    fields.push_back({name, json_number(value), value});
    extra_text += fmt::format(" | {} {:.4f}", name, value);
  }
  write_line(step, fields);
  if (best_possible >= 0) {
    fmt::print("eval step {} | val loss {:.4f} | best possible {:.4f} (gap {:.4f}){}\n", step,
               val_loss, best_possible, val_loss - best_possible, extra_text);
  } else {
    fmt::print("eval step {} | val loss {:.4f}{}\n", step, val_loss, extra_text);
  }
  flush_stdout();
}

void MetricsLog::log_message(const std::string& line) {
  fmt::print("{}\n", line);
  flush_stdout();
}

int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace sg
