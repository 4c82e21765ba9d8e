#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/plan_gpu.h"
#include "config/load_job_spec.h"
#include "data/batch_source.h"
#include "model/model_family.h"
#include "optim/muon.h"
#include "optim/optimizer.h"
#include "parallel/pipeline_schedule.h"
#include "train/trainer.h"

namespace sg {
namespace {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:.2f} {}", bytes, units[u]);
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// The resolved spec's YAML as JSON: maps and sequences as they are, scalars as numbers or
// booleans where they read as such (the spec's own writer prints them so), else strings.
nlohmann::json yaml_to_json(const YAML::Node& node) {
  if (node.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& kv : node) out[kv.first.as<std::string>()] = yaml_to_json(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : node) out.push_back(yaml_to_json(item));
    return out;
  }
  if (!node.IsScalar()) return nullptr;
  const std::string text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted in the YAML: a string
  if (text == "true" || text == "false") return text == "true";
  try {
    size_t used = 0;
    const long long i = std::stoll(text, &used);
    if (used == text.size()) return i;
    const double d = std::stod(text, &used);
    if (used == text.size()) return d;
  } catch (const std::exception&) {
  }
  return text;
}

}  // namespace

int run_plan_command(const std::string& job_path, const std::vector<std::string>& sets,
                     bool as_json, const std::string& gpu) {
  const JobSpec spec = load_job_or_quickstart(job_path, sets);
  const auto family = make_model_family(spec);
  const int tensor = spec.parallel.tensor, pipeline = spec.parallel.pipeline;
  family->check_split(tensor, pipeline);
  // Text for people, or one JSON object (as_json) with the same figures; print() is the text.
  nlohmann::json j;
  const auto print = [&]<typename... T>(fmt::format_string<T...> format, T&&... args) {
    if (!as_json) fmt::print(format, std::forward<T>(args)...);
  };
  const std::string yaml = job_spec_to_yaml(spec);
  print("# resolved job spec ({})\n{}\n", spec.source, yaml);
  j["source"] = spec.source;
  j["spec"] = yaml_to_json(YAML::Load(yaml));

  const ModelDescription& model = family->description();
  const ParameterLayout layout(model);
  const double flops_sample = family->training_flops_per_sample();
  const int units = family->units_per_sample();
  const std::string unit = family->sample_unit();
  j["model"] = {{"summary", family->summary()},
                {"parameters", family->parameter_count()},
                {"flat_elements", layout.total()},
                {"buffer_elements", layout.buffer_total()}};
  j["flops"] = {{"per_sample", flops_sample},
                {"per_" + unit.substr(0, unit.size() - 1), flops_sample / units},
                {"per_step", flops_sample * spec.train.global_batch},
                {"samples_per_step", spec.train.global_batch},
                {"unit", unit},
                {"units_per_sample", units}};
  j["mesh"] = {{"data", spec.parallel.data}, {"tensor", tensor}, {"pipeline", pipeline}};

  print("# plan\n");
  print("model:             {}\n", family->summary());
  print("parameters:        {} ({} elements in the flat buffer{})\n",
             family->parameter_count(), layout.total(),
             layout.buffer_total() > 0
                 ? fmt::format("; {} more in buffers such as running statistics",
                               layout.buffer_total())
                 : std::string());
  if (units > 1) {
    print("flops per token:   {:.4g} (training: 6 x parameters + causal attention)\n",
               flops_sample / units);
  } else {
    print("flops per sample:  {:.4g} (training: forward and backward, 3 x forward)\n",
               flops_sample);
  }
  print("flops per step:    {:.4g} ({} samples{})\n",
             flops_sample * spec.train.global_batch, spec.train.global_batch,
             units > 1 ? fmt::format(" x {} {}", units, unit) : std::string());
  print("virtual mesh:      data {} x tensor {} x pipeline {}\n", spec.parallel.data, tensor,
             pipeline);
  const int processes = spec.devices.processes;
  const int mesh_per_process = tensor * pipeline;
  const int data_processes = processes / mesh_per_process;
  const int replicas_per_process = spec.parallel.data / data_processes;
  print("device map:        {} process(es) on backend {}, {} thread(s) each; each runs {} "
             "virtual data replica(s) one after another\n",
             processes, spec.devices.backend, resolve_threads(spec), replicas_per_process);
  // Process p owns tensor coordinate p % tensor and pipeline stage (p / tensor) % pipeline; the
  // data-parallel group of a coordinate is every (tensor x pipeline)-th process.
  constexpr int kShown = 16;
  nlohmann::json map = nlohmann::json::array();
  for (int p = 0; p < processes; ++p) {
    const int t = p % tensor, stage = (p / tensor) % pipeline, d = p / mesh_per_process;
    const int first = d * replicas_per_process, last = (d + 1) * replicas_per_process - 1;
    map.push_back({{"process", p}, {"tensor", t}, {"stage", stage}, {"replicas", {first, last}}});
    if (p >= kShown) continue;
    print("  process {:>3}: tensor {}, pipeline stage {}, data replicas {}..{}\n", p, t, stage,
          first, last);
  }
  j["device_map"] = {{"processes", processes},
                     {"backend", spec.devices.backend},
                     {"threads", resolve_threads(spec)},
                     {"replicas_per_process", replicas_per_process},
                     {"map", map}};
  j["micro_steps"] = spec.grad_accum_steps();
  if (processes > kShown) print("  ... ({} processes in all)\n", processes);
  print("micro-steps:       {} per replica per step (global batch {} = data {} x "
             "micro_batch {} x {})\n",
             spec.grad_accum_steps(), spec.train.global_batch, spec.parallel.data,
             spec.train.micro_batch, spec.grad_accum_steps());

  if (pipeline > 1) {
    // Each replica's micro-batches fill the pipeline: S-1 of every M+S-1 slots are idle.
    const int M = spec.grad_accum_steps();
    std::string blocks;
    nlohmann::json stages = nlohmann::json::array();
    for (int stage = 0; stage < pipeline; ++stage) {
      const auto [first, count] = stage_blocks(model, stage, pipeline);
      blocks += fmt::format("{}{}-{}", stage == 0 ? "" : " | ", first, first + count - 1);
      stages.push_back({{"first_block", first}, {"blocks", count}});
    }
    j["pipeline"] = {{"stages", stages},
                     {"schedule", spec.parallel.schedule},
                     {"micro_batches", M},
                     {"bubble", static_cast<double>(pipeline - 1) / (M + pipeline - 1)}};
    // The head's cost in units of an average block (block costs are relative).
    double mean_block = 1.0;
    if (!model.block_costs.empty()) {
      mean_block = 0;
      for (double c : model.block_costs) mean_block += c / static_cast<double>(model.block_costs.size());
    }
    print("pipeline stages:   blocks {} (+ the head, worth {:.1f} blocks, on the last)\n",
               blocks, model.last_cost / mean_block);
    print("pipeline:          {} stages, {} schedule, {} micro-batches per replica: bubble "
               "{:.0f}% of each stage's time{}\n",
               pipeline, spec.parallel.schedule, M,
               100.0 * (pipeline - 1) / (M + pipeline - 1),
               M < pipeline ? " (raise train.global_batch or lower train.micro_batch or "
                              "parallel.data for more micro-batches)"
                            : "");
  }

  // Per process: the largest shard of the model (the first and last stages also hold a tied
  // head); ZeRO-1 divides the optimizer state over the data-parallel processes.
  // Synchronised batch statistics run a process's replicas as one batch, and evaluation then
  // has a stage of its own (as the trainer builds them, training_setup.cpp).
  const bool fused = family->synchronized_statistics() && replicas_per_process > 1;
  const int stage_batch = spec.train.micro_batch * (fused ? replicas_per_process : 1);
  double model_share = 0, buffer_share = 0, activation_bytes = 0, weight_copy_bytes = 0;
  for (int stage = 0; stage < pipeline; ++stage) {
    const ParameterLayout shard(model, ModelShard{0, tensor, stage, pipeline});
    model_share = std::max(model_share, static_cast<double>(shard.total()));
    buffer_share = std::max(buffer_share, static_cast<double>(shard.buffer_total()));
    weight_copy_bytes =
        std::max(weight_copy_bytes, static_cast<double>(family->weight_copy_bytes(shard)));
    // Activations with the micro-batches the stage's schedule keeps in flight.
    const int slots = pipeline_slots(spec.parallel.schedule, stage, pipeline,
                                     spec.grad_accum_steps());
    double bytes = static_cast<double>(family->activation_bytes(shard, stage_batch, slots));
    if (fused) bytes += static_cast<double>(family->activation_bytes(shard, spec.train.micro_batch, 1));
    activation_bytes = std::max(activation_bytes, bytes);
  }
  const auto optimizer = make_optimizer(spec.optim, layout, 0, 0);
  const double state_count = static_cast<double>(optimizer->state_names().size());
  const double params_bytes = 4 * (model_share + buffer_share);
  // ZeRO-2 reduce-scatters the gradients (each process receives 1/data_processes of the sum), but
  // the CPU backend still accumulates micro-steps into a full-size buffer, so it is counted whole.
  const double grads_bytes = 4 * model_share;
  const double state_whole = 4 * state_count * model_share;
  const double optimizer_bytes = state_whole / (spec.parallel.zero >= 1 ? data_processes : 1);
  const double muon_scratch_bytes = spec.optim.name == OptimizerKind::Muon
                                        ? 4 * muon_scratch_floats(model, model_share)
                                        : 0.0;
  // Weights, gradients and optimizer state are fp32 in memory in every precision; activations
  // are stored in 16 bits where the family and the backend have it (docs/bf16.md), and the
  // products then multiply a bf16 working copy of the weights.
  const bool act16 = family->activation_storage() != DType::F32;
  const std::string storage = act16 ? "bf16 activations, fp32 master weights and state" : "fp32 storage";
  print("memory per process ({}{}):\n",
        spec.train.precision == Precision::FP32
            ? "fp32"
            : fmt::format("{} products, {}", spec.train.precision, storage),
        mesh_per_process > 1 ? ", the largest tensor x pipeline shard" : "");
  print("  parameters       {}\n", human_bytes(params_bytes));
  if (weight_copy_bytes > 0) {
    print("  weights, bf16    {} (the products' and convolutions' working copy, cast once a step)\n",
          human_bytes(weight_copy_bytes));
  }
  print("  gradients        {}{}\n", human_bytes(grads_bytes),
             spec.parallel.zero >= 2
                 ? fmt::format(" (ZeRO-2: each process receives the reduced 1/{}; the "
                               "accumulation buffer is full size)",
                               data_processes)
                 : "");
  print("  optimizer state  {} ({}: {}){}\n", human_bytes(optimizer_bytes), optimizer->name(),
             join(optimizer->state_names()),
             spec.parallel.zero >= 1 ? fmt::format("; ZeRO-{}: 1/{} of {}", spec.parallel.zero,
                                                   data_processes, human_bytes(state_whole))
                                     : "");
  if (muon_scratch_bytes > 0)
    print("  muon scratch     {} (the Nesterov momentum over the flat buffer, the largest matrix "
          "whole)\n",
          human_bytes(muon_scratch_bytes));
  print("  activations      {} (micro-batch {}{} {}, with backward scratch{}{})\n",
             human_bytes(activation_bytes), stage_batch,
             units > 1 ? fmt::format(" x {}", units) : std::string(), unit,
             pipeline > 1 ? fmt::format("; the largest stage, {} schedule",
                                        spec.parallel.schedule)
                          : "",
             fused ? fmt::format("; {} replicas together for sync_bn, and an evaluation stage of "
                                 "{}",
                                 replicas_per_process, spec.train.micro_batch)
                   : "");
  const double total_bytes =
      params_bytes + weight_copy_bytes + grads_bytes + optimizer_bytes + muon_scratch_bytes +
      activation_bytes;
  print("  total            {}\n", human_bytes(total_bytes));
  j["memory"] = {{"precision", spec.train.precision},
                 {"storage", act16 ? "bf16 activations" : "fp32"},
                 {"parameters_bytes", params_bytes},
                 {"weight_copy_bytes", weight_copy_bytes},
                 {"gradients_bytes", grads_bytes},
                 {"optimizer_state_bytes", optimizer_bytes},
                 {"optimizer_scratch_bytes", muon_scratch_bytes},
                 {"activations_bytes", activation_bytes},
                 {"total_bytes", total_bytes}};
  if (!gpu.empty()) plan_gpu_estimate(spec, *family, gpu, as_json, j);

  // The data: the files must exist; their tokens or images are counted (as the trainer opens
  // them, checksums of the manifest included).
  bool data_ok = true;
  try {
    const Dataset data = open_dataset(spec, family->batch_fields(spec.train.micro_batch));
    print("data:              {}\n", data.description);
    j["data"] = {{"ok", true}, {"description", data.description}};
  } catch (const std::exception& e) {
    data_ok = false;
    print("data:              NOT READY: {}\n", e.what());
    j["data"] = {{"ok", false}, {"error", e.what()}};
  }
  if (as_json) fmt::print("{}\n", j.dump(2));
  if (!data_ok) {
    std::fflush(stdout);
    fmt::print(stderr, "error: the job's data is not ready (see data: above); prepare it, or fix "
                       "data.* in the job\n");
    return kExitRuntime;
  }
  return 0;
}

}  // namespace sg
