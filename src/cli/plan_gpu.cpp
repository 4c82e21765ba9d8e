#include "cli/plan_gpu.h"

#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/gpu_estimate.h"
#include "config/job_spec.h"
#include "model/model_family.h"
#include "train/step_cost.h"
#include "util/error.h"

namespace sg {
namespace {

constexpr size_t kTopOps = 10;

std::string gpu_keys() {
  std::string keys;
  for (const GpuSheet& s : gpu_sheets()) keys += (keys.empty() ? "" : ", ") + s.key;
  return keys;
}

}  // namespace

void plan_gpu_estimate(const JobSpec& spec, const ModelFamily& family, const std::string& gpu,
                       bool as_json, nlohmann::json& j) {
  const GpuSheet* sheet = find_gpu_sheet(gpu);
  if (sheet == nullptr)
    throw SpecError("--gpu '" + gpu + "' is not a GPU plan has a data sheet for; use one of " +
                    gpu_keys());
  // One process's share of the step: its data replicas one after another, each its micro-steps.
  const int split = spec.parallel.tensor * spec.parallel.pipeline;
  const int data_processes = spec.devices.processes / split;
  const int micro_batches = spec.parallel.data / data_processes * spec.grad_accum_steps();
  const CountedStep counted = count_training_step(spec, micro_batches);
  const GpuEfficiency efficiency;
  const StepEstimate step = estimate_step(counted.ops, *sheet, efficiency);

  const bool reduced = spec.train.precision != Precision::FP32;
  const std::string precision(to_string(spec.train.precision));
  // What the family stores in 16 bits on a GPU (docs/bf16.md): its activations, or nothing.
  const bool act16 = family.activation_storage() != DType::F32 &&
                     activation_dtype_for(BackendKind::Cuda, spec.train.precision) != DType::F32;
  const std::string storage = act16 ? "bf16 activations" : "fp32";
  // Whether the products and convolutions multiply a bf16 copy of the weights made once a step
  // (GPT-2's convert, ResNet's conv2d_filter) or cast the fp32 weights per use.
  bool weight_copy = false;
  for (const OpCost& op : counted.ops) weight_copy = weight_copy || op.name == "convert" || op.name == "conv2d_filter";
  const double peak = (reduced ? sheet->reduced_tflops : sheet->fp32_tflops) * 1e12;
  const double samples = static_cast<double>(spec.train.micro_batch) * micro_batches;
  const double model_flops = family.training_flops_per_sample() * samples;
  const double mfu = model_flops / (step.seconds * peak);
  const int units = family.units_per_sample();
  const std::string unit = family.sample_unit();
  const double per_second = samples * units / step.seconds;

  nlohmann::json ops = nlohmann::json::array();
  for (const OpEstimate& op : step.ops) {
    ops.push_back({{"op", op.cost.name},
                   {"seconds", op.seconds},
                   {"share", op.seconds / step.seconds},
                   {"bound", op.compute_bound ? "arithmetic" : "memory"},
                   {"calls", op.cost.calls},
                   {"flops", op.cost.flops},
                   {"bytes", op.cost.bytes},
                   {"launches", op.cost.launches}});
  }
  j["gpu_estimate"] = {
      {"gpu", sheet->key},
      {"gpu_name", sheet->name},
      {"precision", spec.train.precision},
      {"storage", storage},
      {"micro_batches", micro_batches},
      {"samples", samples},
      {"step_seconds", step.seconds},
      {unit + "_per_second", per_second},
      {"model_flops", model_flops},
      {"peak_flops", peak},
      {"mfu", mfu},
      {"bytes", step.bytes},
      {"device_bytes", counted.device_bytes},
      {"ops", ops},
      {"efficiency",
       {{"matrix_reduced", efficiency.matrix_reduced},
        {"matrix_fp32_operands", efficiency.matrix_fp32_operands},
        {"matrix_fp32", efficiency.matrix_fp32},
        {"conv_reduced", efficiency.conv_reduced},
        {"conv_fp32_operands", efficiency.conv_fp32_operands},
        {"conv_fp32", efficiency.conv_fp32},
        {"attention_reduced", efficiency.attention_reduced},
        {"attention_fp32", efficiency.attention_fp32},
        {"memory", efficiency.memory},
        {"launch_seconds", efficiency.launch_seconds}}}};
  if (as_json) return;

  const int samples_on_gpu = micro_batches * spec.train.micro_batch;
  fmt::print("gpu estimate:      {}, {} ({}): {:.1f} ms a step of {}{} {} ({} micro-batch{}) "
             "on one GPU, {:.0f} {}/s, {:.1f}% MFU of {:.0f} TFLOP/s\n",
             sheet->name, spec.train.precision,
             !reduced ? "fp32 throughout"
             : act16  ? "products and activations in " + precision +
                           ", fp32 master weights (" +
                           (weight_copy ? "a bf16 copy a step" : "cast per use") +
                           ") and optimizer state"
                      : "products in " + precision + ", tensors fp32 in memory",
             1e3 * step.seconds, samples_on_gpu,
             units > 1 ? fmt::format(" x {}", units) : std::string(), unit, micro_batches,
             micro_batches == 1 ? "" : "es", per_second, unit, 100 * mfu, peak / 1e12);
  fmt::print("  moves {:.1f} GB through memory ({:.1f} ms at {:.0f}% of {:.2f} TB/s), "
             "{:.3g} flops counted; {:.1f} GiB allocated{}\n",
             step.bytes / 1e9, 1e3 * step.bytes / (sheet->memory_tbs * 1e12 * efficiency.memory),
             100 * efficiency.memory, sheet->memory_tbs, step.flops,
             static_cast<double>(counted.device_bytes) / (1 << 30),
             static_cast<double>(counted.device_bytes) > sheet->memory_gib * (1 << 30)
                 ? fmt::format(" (more than the {:.0f} GiB it has)", sheet->memory_gib)
                 : std::string());
  fmt::print("  top ops:          time      share  bound by    calls  Gflop     GB\n");
  for (size_t i = 0; i < std::min(kTopOps, step.ops.size()); ++i) {
    const OpEstimate& op = step.ops[i];
    fmt::print("    {:<30} {:>7.2f} ms {:>5.1f}%  {:<10} {:>5} {:>8.0f} {:>6.2f}\n", op.cost.name,
               1e3 * op.seconds, 100 * op.seconds / step.seconds,
               op.compute_bound ? "arithmetic" : "memory", op.cost.calls, op.cost.flops / 1e9,
               op.cost.bytes / 1e9);
  }
  fmt::print("  (the whole model on one GPU, one op after another; {}communication between "
             "GPUs not counted; docs/gpu.md \"Estimates\")\n",
             split > 1 ? "the job's tensor x pipeline split not modelled; " : "");
}

}  // namespace sg
