#include <fmt/format.h>

#include "cli/commands.h"
#include "config/load_job_spec.h"
#include "model/gpt2.h"
#include "train/flops.h"
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

}  // namespace

int run_plan_command(const std::string& job_path, const std::vector<std::string>& sets) {
  const JobSpec spec = load_job_or_quickstart(job_path, sets);
  fmt::print("# resolved job spec ({})\n{}\n", spec.source, job_spec_to_yaml(spec));

  const GPT2Shape shape{spec.model.n_layer, spec.model.n_head, spec.model.n_embd,
                        spec.model.context, spec.model.vocab, spec.padded_vocab()};
  const ParameterLayout layout(shape);
  const int T = spec.seq_len();
  const double flops_token = training_flops_per_token(layout, T);
  const double tokens_step = static_cast<double>(spec.train.global_batch) * T;
  const double n = static_cast<double>(layout.total());

  fmt::print("# plan\n");
  fmt::print("parameters:        {} ({} with the vocabulary padded to {})\n",
             layout.real_parameter_count(), layout.total(), spec.padded_vocab());
  fmt::print("flops per token:   {:.4g} (training: 6 x parameters + causal attention)\n",
             flops_token);
  fmt::print("flops per step:    {:.4g} ({} sequences x {} tokens)\n", flops_token * tokens_step,
             spec.train.global_batch, T);
  fmt::print("virtual mesh:      data {} x tensor {} x pipeline {}\n", spec.parallel.data,
             spec.parallel.tensor, spec.parallel.pipeline);
  const int processes = spec.devices.processes;
  const int mesh_per_process = spec.parallel.tensor * spec.parallel.pipeline;
  const int replicas_per_process = spec.parallel.data / (processes / mesh_per_process);
  fmt::print("device map:        {} process(es) on backend {}, {} thread(s) each; each process "
             "runs {} virtual data replica(s) one after another\n",
             processes, spec.devices.backend, resolve_threads(spec), replicas_per_process);
  fmt::print("micro-steps:       {} per replica per step (global batch {} = data {} x "
             "micro_batch {} x {})\n",
             spec.grad_accum_steps(), spec.train.global_batch, spec.parallel.data,
             spec.train.micro_batch, spec.grad_accum_steps());

  const double params_bytes = 4 * n, grads_bytes = 4 * n, optimizer_bytes = 8 * n;
  const double activation_bytes =
      4.0 * static_cast<double>(gpt2_activation_floats(shape, spec.train.micro_batch, T));
  fmt::print("memory per device (fp32):\n");
  fmt::print("  parameters       {}\n", human_bytes(params_bytes));
  fmt::print("  gradients        {}\n", human_bytes(grads_bytes));
  fmt::print("  optimizer state  {} (AdamW m and v)\n", human_bytes(optimizer_bytes));
  fmt::print("  activations      {} (micro-batch {} x {} tokens, with backward scratch)\n",
             human_bytes(activation_bytes), spec.train.micro_batch, T);
  fmt::print("  total            {}\n",
             human_bytes(params_bytes + grads_bytes + optimizer_bytes + activation_bytes));
  return 0;
}

}  // namespace sg
