// The whole trainer on a backend whose memory the host cannot touch (tests/guarded_backend.h),
// against the CPU backend, bitwise: the device-agnostic path a GPU takes (host staging for the
// initialisation, checkpoints and resume; batches uploaded; device groups through host memory)
// computes exactly what the CPU computes, and no host code reads device memory (it would die
// with SIGSEGV). Under mpirun:
//   mpirun -np P test_guarded_training DIR CONFIG
// CONFIG names a job below; DIR is a fresh directory every rank sees. The guarded run stops at
// step 3 and resumes, so the checkpoint round trip goes through device memory too. Exits 1 with
// one line per difference.
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/load_job_spec.h"
#include "guarded_backend.h"
#include "launch/process_world.h"
#include "test_files.h"
#include "train/trainer.h"

namespace {

const char* kGpt = R"(
name: guarded-gpt
seed: 5
model: {arch: gpt2, n_layer: 2, n_head: 4, n_embd: 32, context: 16, vocab: 96}
data: {dataset: synthetic, synthetic_train_tokens: 20000, synthetic_val_tokens: 2000}
optim: {lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 2, weight_decay: 0.1, grad_clip: 1.0}
train: {steps: 6, global_batch: 8, micro_batch: 2}
eval: {every: 3, steps: 2}
devices: {backend: cpu, processes: 1, threads: 1}
checkpoint: {every: 3, keep: 3, resume: auto}
log: {every: 1}
)";

const char* kResNet = R"(
name: guarded-resnet
seed: 9
model: {arch: resnet, depth: 10, width: 4, classes: 10, image_size: 32, label_smoothing: 0.1}
data: {dataset: synthetic, synthetic_images: 500}
optim: {name: sgd, lr: 0.05, min_lr: 0.001, warmup_steps: 2, momentum: 0.9, weight_decay: 1.0e-4, grad_clip: 1.0}
train: {steps: 6, global_batch: 8, micro_batch: 2}
eval: {every: 3, steps: 2}
devices: {backend: cpu, processes: 1, threads: 1}
checkpoint: {every: 3, keep: 3, resume: auto}
log: {every: 1}
)";

struct Config {
  const char* job;
  std::vector<std::string> sets;
};

// Each exercises one path of device memory across processes.
const std::map<std::string, Config> kConfigs = {
    {"gpt", {kGpt, {}}},                                                       // accumulation
    {"gpt-data", {kGpt, {"parallel.data=2", "devices.processes=2"}}},          // bucketed
    {"gpt-det", {kGpt, {"parallel.data=2", "devices.processes=2", "train.deterministic=true"}}},
    {"gpt-zero2", {kGpt, {"parallel.data=2", "devices.processes=2", "parallel.zero=2"}}},
    {"gpt-tensor", {kGpt, {"parallel.tensor=2", "devices.processes=2"}}},      // vocab-parallel
    {"gpt-tensor-det",
     {kGpt, {"parallel.tensor=2", "devices.processes=2", "train.deterministic=true"}}},
    {"gpt-pipe", {kGpt, {"parallel.pipeline=2", "devices.processes=2"}}},      // tied wte
    {"gpt-3d",
     {kGpt, {"parallel.tensor=2", "parallel.pipeline=2", "devices.processes=4", "parallel.zero=1"}}},
    {"gpt-pipe-full", {kGpt, {"parallel.pipeline=2", "devices.processes=2", "train.recompute=full"}}},
    {"gpt-tensor-selective",
     {kGpt, {"parallel.tensor=2", "devices.processes=2", "train.recompute=selective"}}},
    {"resnet", {kResNet, {}}},
    {"resnet-full", {kResNet, {"train.recompute=full"}}},
    {"resnet-syncbn",
     {kResNet, {"parallel.data=4", "devices.processes=2", "model.sync_bn=true"}}},
    {"resnet-pipe", {kResNet, {"parallel.pipeline=2", "devices.processes=2"}}},
};

std::vector<std::string> step_lines(const std::string& run_dir) {
  std::istringstream in(sg::test::read_file(run_dir + "/metrics.jsonl"));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"loss\"") != std::string::npos) out.push_back(line.substr(0, line.find(", \"step_ms\"")));
    if (line.find("\"val_loss\"") != std::string::npos) out.push_back(line);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || kConfigs.count(argv[2]) == 0) {
    std::fprintf(stderr, "usage: test_guarded_training DIR CONFIG (a config of the test)\n");
    return 2;
  }
  const std::string dir = argv[1];
  const Config& config = kConfigs.at(argv[2]);
  auto world = sg::open_world(sg::detect_launcher());
  auto job = [&](const std::string& sub) {
    std::vector<std::string> sets = config.sets;
    sets.push_back("log.dir=" + dir + "/" + sub);
    return sg::parse_job_spec(config.job, argv[2], sets);
  };
  sg::TrainOptions options;
  options.quiet = true;
  sg::run_training(job("cpu"), *world, options);

  sg::test::GuardedBackend guarded(sg::cpu_backend());
  options.backend = &guarded;
  options.stop_after = 3;
  sg::run_training(job("guarded"), *world, options);
  options.stop_after = 0;
  const sg::TrainResult resumed = sg::run_training(job("guarded"), *world, options);

  int failures = 0;
  if (world->rank() == 0) {
    if (resumed.first_step != 3) {
      std::printf("%s: the guarded run resumed at step %lld, not 3\n", argv[2],
                  static_cast<long long>(resumed.first_step));
      ++failures;
    }
    const auto a = step_lines(dir + "/cpu"), b = step_lines(dir + "/guarded");
    if (a.size() < 6 || a != b) {
      std::printf("%s: metrics differ (%zu vs %zu lines)\n", argv[2], a.size(), b.size());
      for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        if (a[i] != b[i]) std::printf("  cpu:     %s\n  guarded: %s\n", a[i].c_str(), b[i].c_str());
      }
      ++failures;
    }
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      const std::string fa = sg::test::read_file(dir + "/cpu/checkpoints/step_00000006/" + file);
      const std::string fb = sg::test::read_file(dir + "/guarded/checkpoints/step_00000006/" + file);
      if (fa.empty() || fa != fb) {
        std::printf("%s: %s differs between the CPU and the guarded backend\n", argv[2], file);
        ++failures;
      }
    }
    std::printf("%s: %s\n", argv[2], failures == 0 ? "bitwise equal" : "FAILED");
  }
  world->broadcast(&failures, sizeof(failures), 0);
  return failures == 0 ? 0 : 1;
}
