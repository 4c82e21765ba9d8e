// singularity: train large neural networks from a YAML job spec.
// This file only wires the command line (CLI11) to the subcommands and maps errors to exit
// codes: usage and job-spec errors exit 2, runtime errors exit 1, each reported on one line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "backend/blas_core.h"
#include "cli/commands.h"
#include "cli/sweep_command.h"
#include "launch/process_world.h"
#include "launch/stop_signal.h"
#include "util/error.h"

namespace {

struct Arguments {
  std::string job;
  std::vector<std::string> sets;
  long stop_after = 0;
  std::string checkpoint;
  sg::SampleArguments sample;
  bool peak = false;
  bool plan_json = false;
  std::string plan_gpu;
  sg::PrepareArguments prepare;
  sg::ExportArguments export_args;
  sg::SweepArguments sweep;
  std::vector<std::string> report_dirs;
  std::string report_output = "report.html";
};

void add_job_arguments(CLI::App* cmd, Arguments& args,
                       const char* help = "job spec (YAML); omitted: the embedded quickstart") {
  cmd->add_option("JOB", args.job, help);
  cmd->add_option("--set", args.sets,
                  "override a job-spec key, e.g. --set optim.lr=3e-4 (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
}

// One line per failing rank, then the whole job ends: with several MPI ranks, MPI_Abort takes
// the others down too, so no rank is left waiting in a collective.
int report_and_exit(const char* message, int code) {
  fmt::print(stderr, "{}error: {}\n", sg::rank_prefix(), message);
  std::fflush(stderr);
  sg::abort_job(code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread of ours starts: stop signals go to one thread only (launch/stop_signal.h).
  const bool blocked_from_start = sg::block_stop_signals();
  sg::reexec_with_best_blas_core(argv, !blocked_from_start);
  sg::start_signal_thread();
  sg::remember_arguments(argc, argv);
  CLI::App app{"singularity: train large neural networks from a YAML job spec"};
  app.set_version_flag("--version", std::string("singularity ") + SINGULARITY_VERSION);
  app.require_subcommand(1);
  Arguments args;

  auto* train = app.add_subcommand("train", "validate the job, train, evaluate and checkpoint");
  add_job_arguments(train, args);
  train->add_option("--stop-after", args.stop_after,
                    "stop after this many optimizer steps (checkpointed); the schedule still "
                    "follows train.steps, so a later run resumes exactly")
      ->check(CLI::PositiveNumber);

  auto* plan = app.add_subcommand(
      "plan", "validate the job and print the resolved spec, parameters, FLOPs and memory");
  add_job_arguments(plan, args);
  plan->add_flag("--json", args.plan_json,
                 "print the resolved spec, mesh, device map, memory, FLOPs and data as one JSON "
                 "object");
  plan->add_option("--gpu", args.plan_gpu,
                   "also estimate the step on this GPU from its data sheet: each op's FLOPs "
                   "and bytes as the CUDA backend runs it (h200, h100, h100-pcie, a100, l40s)")
      ->type_name("NAME");

  auto* eval = app.add_subcommand("eval", "validation loss and perplexity of a checkpoint");
  add_job_arguments(eval, args, "job spec (YAML); omitted: the job the checkpoint was written by");
  eval->add_option("--checkpoint", args.checkpoint,
                   "checkpoint directory (step_*), or a run directory (newest checkpoint)")
      ->required();

  auto* sample = app.add_subcommand("sample", "generate tokens from a GPT checkpoint");
  add_job_arguments(sample, args,
                    "job spec (YAML); omitted: the job the checkpoint was written by");
  sample->add_option("--checkpoint", args.sample.checkpoint,
                     "checkpoint directory (step_*), or a run directory (newest checkpoint)")
      ->required();
  // Values are checked by run_sample_command, whose errors say what to give instead.
  sample->add_option("--prompt", args.sample.prompt,
                     "prompt: text (GPT-2-tokenized models) or token ids, e.g. \"1 2 3\"");
  sample->add_option("--prompts", args.sample.prompts_file,
                     "file of prompts, one per line (text or token ids), each generated "
                     "independently; instead of --prompt")
      ->type_name("FILE");
  sample->add_option("--tokens", args.sample.tokens, "tokens to generate per prompt (default 32)");
  sample->add_option("--temperature", args.sample.temperature,
                     "sampling temperature (default 1); 0 = greedy");
  sample->add_option("--top-k", args.sample.top_k,
                     "sample from the k most likely tokens only; 0 = all (default)");
  sample->add_option("--top-p", args.sample.top_p,
                     "nucleus sampling: the fewest most likely tokens whose probability reaches "
                     "p; 1 = off (default)");
  sample->add_option("--seed", args.sample.seed,
                     "sampling seed (default 1337); prompt i of --prompts uses seed + i");
  sample->add_option("--tokenizer", args.prepare.tokenizer_dir,
                     "GPT-2 tokenizer directory for text prompts (default $SINGULARITY_TOKENIZER)");

  auto* prepare = app.add_subcommand(
      "prepare", "turn raw datasets into token shards, or index (and pack) an ImageNet tree");
  prepare->add_option("KIND", args.prepare.kind, "text, openwebtext, wikipedia or imagenet")
      ->required()
      ->check(CLI::IsMember({"text", "openwebtext", "wikipedia", "imagenet"}));
  prepare->add_option("SRC", args.prepare.src, "the raw dataset (file, archive or directory)")
      ->required();
  prepare->add_option("DST", args.prepare.dst, "output directory")->required();
  prepare->add_option("--tokenizer", args.prepare.tokenizer_dir,
                      "directory with GPT-2's encoder.json and vocab.bpe (default "
                      "$SINGULARITY_TOKENIZER)");
  prepare->add_option("--shard-size", args.prepare.shard_size, "tokens per train shard")
      ->check(CLI::PositiveNumber);
  prepare->add_option("--val-tokens", args.prepare.val_tokens,
                      "tokens held out for validation (default 10%, at most 10M)");
  prepare->add_option("--emit-text", args.prepare.emit_text,
                      "also write the cleaned text to this file");
  prepare->add_option("--threads", args.prepare.threads, "worker threads (0 = all cores)")
      ->check(CLI::NonNegativeNumber);
  prepare->add_flag("--force", args.prepare.force, "replace a DST holding another dataset");
  prepare->add_flag("--pack", args.prepare.pack, "imagenet: also pack resized JPEGs into shards");
  prepare->add_option("--pack-short-side", args.prepare.pack_short_side,
                      "imagenet: shorter side of packed images")
      ->check(CLI::Range(32, 4096));
  prepare->add_flag("--full-decode", args.prepare.full_decode,
                    "imagenet: decode every image, not only its header");
  prepare->add_flag("--strict", args.prepare.strict, "imagenet: exit 1 when problems are found");

  auto* sweep = app.add_subcommand(
      "sweep", "run a grid or list of job overrides as separate runs, and summarise them");
  sweep->add_option("SWEEP", args.sweep.file, "sweep file (YAML): base, grid, points, set, ...")
      ->required();
  auto* sweep_dry = sweep->add_flag("--dry-run", args.sweep.dry_run,
                                    "list the points and their run directories; run nothing");
  auto* sweep_summary =
      sweep->add_flag("--summary", args.sweep.summary,
                      "print and write <dir>/summary.csv from the run directories");
  auto* sweep_index = sweep->add_option("--index", args.sweep.index,
                                        "run only point N (what a Slurm array task runs)")
                          ->check(CLI::NonNegativeNumber);
  auto* sweep_slurm = sweep->add_flag(
      "--slurm", args.sweep.slurm,
      "write <dir>/sweep.sbatch, an array job of one task per point, and submit it with sbatch");
  sweep_dry->excludes(sweep_summary, sweep_index, sweep_slurm);
  sweep_summary->excludes(sweep_index, sweep_slurm);
  sweep_index->excludes(sweep_slurm);
  sweep->add_option("--max-parallel", args.sweep.max_parallel,
                    "--slurm: array tasks running at once (default 4)")
      ->check(CLI::PositiveNumber)
      ->needs(sweep_slurm);
  sweep->add_flag("--no-submit", args.sweep.no_submit, "--slurm: write the script only")
      ->needs(sweep_slurm);
  sweep->add_option("--sbatch-arg", args.sweep.sbatch_args,
                    "--slurm: an extra sbatch option for the script, e.g. "
                    "--sbatch-arg=--gres=gpu:4 (repeatable)")
      ->allow_extra_args(false)
      ->needs(sweep_slurm);

  auto* report = app.add_subcommand(
      "report", "an HTML page plotting runs' metrics (a sweep's directory: its points)");
  report->add_option("RUN_DIR", args.report_dirs, "run directories (log.dir) or sweep directories")
      ->required()
      ->check(CLI::ExistingDirectory);
  report->add_option("-o,--output", args.report_output, "the HTML file to write")
      ->capture_default_str();

  auto* export_cmd = app.add_subcommand(
      "export", "write a checkpoint's weights for Hugging Face transformers or torchvision");
  export_cmd
      ->add_option("CHECKPOINT", args.export_args.source,
                   "checkpoint directory (step_*), a run directory (newest checkpoint), or a job "
                   "file (its starting weights: model.init_from or its initialisation)")
      ->required();
  export_cmd->add_option("DIR", args.export_args.dir,
                         "output directory (torchvision: or a .safetensors file)")
      ->required();
  export_cmd->add_option("--format", args.export_args.format,
                         "hf (GPT-2 or Llama for transformers) or torchvision (ResNet state dict)")
      ->required()
      ->check(CLI::IsMember({"hf", "torchvision"}));
  export_cmd->add_option("--tokenizer", args.export_args.tokenizer_dir,
                         "hf: also copy this GPT-2 tokenizer (encoder.json, vocab.bpe) as "
                         "vocab.json and merges.txt");
  export_cmd->add_option("--set", args.export_args.sets,
                         "override a job-spec key of the job file or of the job recorded in the "
                         "checkpoint, e.g. --set model.init_from=PATH (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);

  auto* info = app.add_subcommand("info", "backends compiled in, devices, library versions");
  info->add_flag("--peak", args.peak, "also measure this machine's fp32 SGEMM peak");

  if (argc > 1 && argv[1][0] != '-') {
    const std::string command = argv[1];
    if (command != "train" && command != "plan" && command != "eval" && command != "sample" &&
        command != "info" && command != "prepare" && command != "sweep" &&
        command != "report" && command != "export") {
      fmt::print(stderr,
                 "error: unknown command '{}'; use one of train, plan, eval, sample, prepare, "
                 "sweep, report, export, info (see singularity --help)\n",
                 command);
      return sg::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help/version (code 0) or the error
    return code == 0 ? 0 : sg::kExitUsage;
  }

  try {
    if (*train) return sg::run_train_command(args.job, args.sets, args.stop_after);
    if (*plan) return sg::run_plan_command(args.job, args.sets, args.plan_json, args.plan_gpu);
    if (*sample) {
      args.sample.tokenizer_dir = args.prepare.tokenizer_dir;
      return sg::run_sample_command(args.job, args.sets, args.sample);
    }
    if (*info) return sg::run_info_command(args.peak);
    if (*eval) return sg::run_eval_command(args.job, args.sets, args.checkpoint);
    if (*prepare) return sg::run_prepare_command(args.prepare);
    if (*sweep) return sg::run_sweep_command(args.sweep);
    if (*export_cmd) return sg::run_export_command(args.export_args);
    if (*report) return sg::run_report_command(args.report_dirs, args.report_output);
  } catch (const sg::SpecError& e) {
    return report_and_exit(e.what(), sg::kExitUsage);
  } catch (const sg::RunError& e) {
    return report_and_exit(e.what(), sg::kExitRuntime);
  } catch (const std::exception& e) {
    return report_and_exit(e.what(), sg::kExitRuntime);
  }
  return 0;
}
