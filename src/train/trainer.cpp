#include "train/trainer.h"

#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "backend/cpu_peak.h"
#include "checkpoint/checkpoint.h"
#include "config/load_job_spec.h"
#include "data/sequence_sampler.h"
#include "data/token_dataset.h"
#include "launch/process_world.h"
#include "model/gpt2.h"
#include "optim/lr_schedule.h"
#include "parallel/data_parallel_optimizer.h"
#include "parallel/deterministic_reduce.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/process_mesh.h"
#include "parallel/tensor_group.h"
#include "train/evaluate.h"
#include "train/flops.h"
#include "train/metrics_log.h"
#include "train/train_checkpoint.h"
#include "util/error.h"

namespace sg {
namespace {

GPT2Shape gpt2_shape_of(const JobSpec& spec) {
  return {spec.model.n_layer, spec.model.n_head, spec.model.n_embd, spec.model.context,
          spec.model.vocab, spec.padded_vocab()};
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw RunError(path + ": cannot write; check that log.dir is writable");
}

// Test hook (tests/e2e/failure_test.sh): SINGULARITY_TEST_FAIL="RANK:STEP" makes that rank
// throw during that step, before the gradient reduction, as a real fault would.
struct FailureInjection {
  int64_t step = 0;
};

std::optional<FailureInjection> failure_injection_from_env(int rank) {
  const char* v = std::getenv("SINGULARITY_TEST_FAIL");
  if (v == nullptr) return std::nullopt;
  int fail_rank = -1;
  long long fail_step = -1;
  if (std::sscanf(v, "%d:%lld", &fail_rank, &fail_step) != 2 || fail_rank != rank) {
    return std::nullopt;
  }
  return FailureInjection{fail_step};
}

// Rank 0 alone decides which checkpoint to resume from and tells the others, so every rank
// resumes the same step even where their views of the file system could differ. With
// checkpoint.resume: never, an earlier run's checkpoints are moved aside (not deleted), so a
// later `auto` cannot resume the old run by mistake.
std::optional<std::string> choose_resume_checkpoint(const JobSpec& spec,
                                                    const std::string& checkpoints_dir,
                                                    Communicator& world) {
  std::string chosen;
  if (world.rank() == 0) {
    if (spec.checkpoint.resume == "never" && !list_checkpoints(checkpoints_dir).empty()) {
      const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
      char stamp[32];
      std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", std::gmtime(&now));
      std::string aside = checkpoints_dir + ".replaced-" + stamp;
      for (int n = 2; std::filesystem::exists(aside); ++n) {
        aside = checkpoints_dir + ".replaced-" + stamp + "-" + std::to_string(n);
      }
      std::filesystem::rename(checkpoints_dir, aside);
      std::filesystem::create_directories(checkpoints_dir);
      fmt::print(stderr,
                 "warning: checkpoint.resume is never: moved the earlier run's checkpoints to "
                 "{}\n",
                 aside);
    }
    std::vector<std::string> warnings;
    const auto found = find_resume_checkpoint(checkpoints_dir, spec.checkpoint.resume, &warnings);
    for (const auto& w : warnings) fmt::print(stderr, "warning: {}\n", w);
    if (found) chosen = *found;
  }
  uint64_t length = chosen.size();
  world.broadcast(&length, sizeof(length), 0);
  chosen.resize(length);
  world.broadcast(chosen.data(), length, 0);
  if (chosen.empty()) return std::nullopt;
  return chosen;
}

bool due(int64_t step, int every, int64_t last_step) {
  return step == last_step || (every > 0 && step % every == 0);
}

}  // namespace

int resolve_threads(const JobSpec& spec) {
  if (spec.devices.threads > 0) return spec.devices.threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Processes sharing this node: the launcher says so; else assume all of the job's processes
  // land here (the self-launch case).
  const auto launcher = detect_launcher();
  const int on_node = launcher ? launcher->local_size : spec.devices.processes;
  return std::max(1, cores / std::max(1, on_node));
}

TrainResult run_training(const JobSpec& spec, const TrainOptions& options) {
  auto world = make_single_process_communicator();
  return run_training(spec, *world, options);
}

TrainResult run_training(const JobSpec& spec, Communicator& world, const TrainOptions& options_in) {
  TrainOptions options = options_in;
  if (spec.model.arch != "gpt2") {
    throw SpecError(spec.source + ": model.arch '" + spec.model.arch +
                    "' cannot be trained yet; use gpt2");
  }
  if (spec.devices.backend != "cpu") {
    throw RunError("devices.backend '" + spec.devices.backend +
                   "' has no training loop yet in this version; use devices.backend: cpu");
  }
  if (world.size() != spec.devices.processes) {
    throw SpecError(fmt::format("{}: the job asks for devices.processes {} but runs on {} "
                                "process(es); launch it with mpirun -np {} or set "
                                "devices.processes: {}",
                                spec.source, spec.devices.processes, world.size(),
                                spec.devices.processes, world.size()));
  }
  const bool root = world.rank() == 0;
  const std::optional<FailureInjection> inject = failure_injection_from_env(world.rank());
  const int threads = resolve_threads(spec);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);

  const std::string run_dir = spec.log.dir;
  const std::string checkpoints_dir = run_dir + "/checkpoints";
  if (root) {
    std::filesystem::create_directories(checkpoints_dir);
    write_text_file(run_dir + "/job.yaml", job_spec_to_yaml(spec));
  } else {
    options.quiet = true;
  }

  TokenSplits data = open_token_dataset(spec);
  const int T = spec.seq_len();
  const int micro_batch = spec.train.micro_batch;
  const SequenceSampler train_sampler(data.train->size(), T, spec.seed);
  const SequenceSampler val_sampler = make_validation_sampler(spec, *data.val);

  // This process's place in the virtual mesh: its shard of the model (tensor rank, pipeline
  // stage) and its block of data-parallel replicas.
  const ProcessMesh mesh = make_process_mesh(spec, world);
  Communicator& data_group = *mesh.data_group;
  const bool deterministic = spec.train.deterministic;
  TensorGroup tensor_group(*mesh.tensor_group, deterministic);
  const ParameterLayout whole_layout(gpt2_shape_of(spec));
  const ParameterLayout layout(gpt2_shape_of(spec), mesh.shard());
  DataParallelOptimizer optimizer(layout, spec.optim, spec.parallel.zero, data_group,
                                  layout.sharded() ? mesh.model_group.get() : nullptr);
  std::vector<float> params(optimizer.padded_size(), 0.0f), grads(optimizer.padded_size(), 0.0f);
  init_gpt2_parameters(params.data(), layout, spec.model.init_std, spec.seed);

  TrainerState state;
  state.seed = spec.seed;
  const auto resume_path = choose_resume_checkpoint(spec, checkpoints_dir, world);
  if (resume_path) {
    // Checkpoints hold whole tensors: each process takes its shard, whatever mesh wrote them.
    std::vector<float> m(layout.total()), v(layout.total());
    state = load_training_checkpoint(*resume_path, layout, params.data(), m.data(), v.data());
    optimizer.load_moments(m.data(), v.data());
    if (state.seed != spec.seed) {
      throw RunError(*resume_path + ": checkpoint was written with seed " +
                     std::to_string(state.seed) + " but the job has seed " +
                     std::to_string(spec.seed) + "; resume with the same seed or set "
                     "checkpoint.resume: never");
    }
  }

  const int64_t total_steps = spec.train.steps;
  const int64_t last_step = options.stop_after > 0
                                ? std::min<int64_t>(options.stop_after, total_steps)
                                : total_steps;
  std::optional<MetricsLog> log;
  if (root) log.emplace(run_dir, state.step, total_steps);
  const int accum = spec.grad_accum_steps();  // micro-batches per replica and step
  GPT2 model(layout, micro_batch, T,
             pipeline_slots(spec.parallel.schedule, mesh.stage, mesh.stages, accum),
             &tensor_group);
  PipelineRunner runner(model, *mesh.pipeline_group, spec.parallel.schedule, accum);

  const double flops_per_step = training_flops_per_token(whole_layout, T) *
                                static_cast<double>(spec.train.global_batch) * T / world.size();
  const double peak_flops = spec.devices.peak_tflops > 0 ? spec.devices.peak_tflops * 1e12
                                                         : measure_sgemm_peak_flops(threads);
  const std::optional<double> best = data.best_val_loss;

  TrainResult result;
  result.first_step = state.step;
  result.best_possible_val_loss = best;
  if (!options.quiet) {
    log->log_message(fmt::format(
        "{}: {} parameters, {} on {} process(es) x {} thread(s) (mesh data {} x tensor {} x "
        "pipeline {}), {} steps of {} sequences x {} tokens{}",
        spec.name, layout.real_parameter_count(), data.description, world.size(), threads,
        spec.parallel.data, spec.parallel.tensor, spec.parallel.pipeline,
        total_steps,
        spec.train.global_batch, T,
        resume_path ? fmt::format(", resumed from {} at step {}", *resume_path, state.step)
                    : std::string()));
  }
  // Validation runs on the shards of replica block 0 (world rank 0 among them), the others go on.
  const auto validate = [&]() {
    return evaluate_validation(runner, micro_batch, T, params.data(), *data.val, val_sampler,
                               spec.eval.steps, *mesh.model_group, mesh.reports_loss());
  };
  if (mesh.data == 0 && state.step == 0 && spec.eval.steps > 0) {
    const float v = validate();
    result.first_val_loss = v;
    if (root) log->log_eval(0, v, best.value_or(-1));
  }

  const int replicas = spec.parallel.data;
  const int local_replicas = replicas / mesh.data_processes;
  const int first_replica = mesh.data * local_replicas;
  const int per_replica = spec.global_batch_per_replica();
  const float dloss = 1.0f / (static_cast<float>(spec.train.global_batch) * T);
  if (deterministic &&
      (!is_power_of_two(local_replicas) || !is_power_of_two(mesh.data_processes))) {
    throw SpecError(fmt::format(
        "{}: train.deterministic sums replicas in a fixed binary tree, so the data-parallel "
        "processes ({}) and the replicas per process ({}) must be powers of two",
        spec.source, mesh.data_processes, local_replicas));
  }
  // Bucketed all-reduce overlapped with the last backward: data parallelism over several
  // processes, outside deterministic mode, not under ZeRO-2 (which reduce-scatters) and with
  // one pipeline stage (the tied embedding's gradient is completed between stages first).
  const bool bucketed =
      data_group.size() > 1 && !deterministic && spec.parallel.zero < 2 && mesh.stages == 1;
  ReplicaTreeSum tree_sum(deterministic ? grads.size() : 0);
  std::vector<float> replica_grads(deterministic ? grads.size() : 0), tree_scratch, tied_scratch;
  std::vector<double> replica_losses(deterministic ? static_cast<size_t>(replicas) : 0);

  std::vector<float> moments_m, moments_v;  // gathered for checkpoints
  while (state.step < last_step) {
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t step = state.step;  // 0-based index of this step
    const double lr = learning_rate_at(spec.optim, static_cast<int>(step), static_cast<int>(total_steps));
    std::memset(grads.data(), 0, grads.size() * sizeof(float));
    double loss_sum = 0;
    // Virtual data-parallel replicas run one after another on the same weights; each sees the
    // sequences the virtual mesh assigns it, whatever the physical layout. In deterministic mode
    // each replica's gradient is kept apart and summed in the canonical tree.
    if (deterministic) {
      tree_sum.clear();
      std::fill(replica_losses.begin(), replica_losses.end(), 0.0);
    }
    for (int r = first_replica; r < first_replica + local_replicas; ++r) {
      float* target_grads = deterministic ? replica_grads.data() : grads.data();
      if (deterministic) std::memset(target_grads, 0, replica_grads.size() * sizeof(float));
      // The replica's micro-batches through this process's pipeline stage.
      const auto fill = [&](int a, int32_t* in, int32_t* tgt) {
        const uint64_t first = state.train_sequences + static_cast<uint64_t>(r) * per_replica +
                               static_cast<uint64_t>(a) * micro_batch;
        fill_batch(in, tgt, *data.train, train_sampler, first, micro_batch, T);
      };
      // The last backward of this process's step: each range of gradients starts its
      // reduction over the processes as soon as backward has finished it ("buckets").
      const bool last = r == first_replica + local_replicas - 1;
      PipelineRunner::OnReady on_ready;
      if (last && bucketed) {
        on_ready = [&](size_t begin, size_t end) {
          data_group.start_all_reduce_sum(grads.data() + begin, end - begin);
          data_group.progress();
        };
      }
      double replica_loss = runner.train(params.data(), target_grads, dloss, fill, on_ready);
      if (!mesh.reports_loss()) replica_loss = 0;
      if (deterministic) {
        tree_sum.add(target_grads);
        replica_losses[static_cast<size_t>(r)] = replica_loss;
      } else {
        loss_sum += replica_loss;
      }
    }
    if (deterministic) {
      std::memcpy(grads.data(), tree_sum.result(), grads.size() * sizeof(float));
      tree_all_reduce(grads.data(), grads.size(), data_group, tree_scratch);
      // One slot per replica, zero elsewhere: the MPI sum is exact, then a fixed-order sum.
      if (world.size() > 1) world.all_reduce_sum(replica_losses.data(), replica_losses.size());
      for (double l : replica_losses) loss_sum += l;
    }
    if (inject && inject->step == step + 1) {
      throw RunError(fmt::format("injected failure at step {} (SINGULARITY_TEST_FAIL)", step + 1));
    }
    // Replicas on other processes: the optimizer sums their gradients (which already carry the
    // 1/(global batch) factor, so the sum is the gradient of the mean loss); losses likewise.
    if (world.size() > 1 && !deterministic) world.all_reduce_sum(&loss_sum, 1);
    const double loss = loss_sum / (static_cast<double>(replicas) * accum);
    if (bucketed) data_group.wait_all();
    add_tied_embedding_grads(layout, grads.data(), *mesh.pipeline_group, tied_scratch);
    const float norm =
        deterministic || bucketed
            ? optimizer.step_reduced(params.data(), grads.data(), lr, static_cast<int>(step + 1))
            : optimizer.step(params.data(), grads.data(), lr, static_cast<int>(step + 1));
    copy_tied_embedding(layout, params.data(), *mesh.pipeline_group);
    state.step = step + 1;
    state.train_sequences += static_cast<uint64_t>(spec.train.global_batch);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    result.final_loss = loss;
    if (!std::isfinite(loss)) {
      throw RunError(fmt::format("loss is {} at step {}: training diverged; lower optim.lr or "
                                 "raise optim.warmup_steps and resume from the last checkpoint",
                                 loss, state.step));
    }

    StepMetrics m;
    m.step = state.step;
    m.loss = static_cast<float>(loss);
    m.lr = static_cast<float>(lr);
    m.grad_norm = norm;
    m.step_ms = seconds * 1e3;
    m.tokens_per_s = static_cast<double>(spec.train.global_batch) * T / seconds;
    m.mfu = flops_per_step / seconds / peak_flops;
    m.peak_mem_bytes = peak_resident_bytes();
    if (root) {
      const bool print = !options.quiet && (state.step % spec.log.every == 0 ||
                                            state.step == last_step || state.step == 1);
      log->log_step(m, print);
    }
    if (mesh.data == 0 && spec.eval.steps > 0 && due(state.step, spec.eval.every, last_step)) {
      const float v = validate();
      result.last_val_loss = v;
      if (root) log->log_eval(state.step, v, best.value_or(-1));
    }
    if (due(state.step, spec.checkpoint.every, last_step)) {
      // Collective under ZeRO: every process contributes its shard of the moments. The
      // checkpoint holds whole tensors, assembled from the shards of replica block 0.
      optimizer.gather_moments(moments_m, moments_v);
      if (mesh.data == 0) {
        // Whole tensors, assembled for rank 0 only, and only while saving.
        std::vector<float> whole_params, whole_m, whole_v;
        const float *p = params.data(), *mm = moments_m.data(), *vv = moments_v.data();
        if (layout.sharded()) {
          gather_whole_model(layout, params.data(), whole_params, *mesh.model_group);
          gather_whole_model(layout, moments_m.data(), whole_m, *mesh.model_group);
          gather_whole_model(layout, moments_v.data(), whole_v, *mesh.model_group);
          p = whole_params.data();
          mm = whole_m.data();
          vv = whole_v.data();
        }
        if (root) {
          const std::string path =
              save_training_checkpoint(checkpoints_dir, spec, whole_layout, p, mm, vv, state);
          if (!options.quiet) log->log_message("saved checkpoint " + path);
        }
      }
    }
  }
  result.last_step = state.step;
  return result;
}

}  // namespace sg
