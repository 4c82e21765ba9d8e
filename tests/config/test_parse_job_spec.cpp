// Reading good job specs: values, defaults, flow maps, overrides and the YAML round trip.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model/gpt2_config.h"
#include "model/resnet_config.h"
#include "spec_test_util.h"

using namespace sg;
using sg::test::differing_keys;
using sg::test::spec_error;

namespace {

const char* kFullSpec = R"(name: gpt2-small
seed: 42
model:
  arch: gpt2
  n_layer: 4
  n_head: 4
  n_embd: 128
  context: 256
  vocab: 50257
  init_std: 0.1
data:
  dataset: openwebtext
  train: data/owt/train_*.bin
  val: "data/owt/val_*.bin"
optim:
  name: adamw
  lr: 0.333333333333333315
  min_lr: 6e-5
  warmup_steps: 10
  decay: linear
  betas: [0.9, 0.99]
  eps: 1.0e-10
  weight_decay: 0.1
  grad_clip: 0
train:
  steps: 100
  global_batch: 32
  micro_batch: 4
  seq_len: 128
  precision: bf16
  recompute: selective
  deterministic: yes
eval: {every: 250, steps: 20}
parallel: {data: 8, tensor: 2, pipeline: 2, schedule: gpipe, zero: 2}
devices: {backend: cuda, processes: 16, threads: auto, peak_tflops: 989.5}
checkpoint: {every: 50, keep: 0, resume: never}
log: {dir: /tmp/run, every: 5}
)";

}  // namespace

TEST_CASE("a full spec reads every key, in block and flow style") {
  JobSpec spec = parse_job_spec(kFullSpec, "full.yaml", {});
  CHECK(spec.name == "gpt2-small");
  CHECK(spec.seed == 42);
  CHECK(spec.model.as<GPT2Config>().n_layer == 4);
  CHECK(spec.model.as<GPT2Config>().n_embd == 128);
  CHECK(spec.model.as<GPT2Config>().init_std == 0.1f);
  CHECK(spec.data.dataset == sg::DatasetKind::OpenWebText);
  CHECK(spec.data.train == "data/owt/train_*.bin");
  CHECK(spec.data.val == "data/owt/val_*.bin");
  CHECK(spec.optim.lr == 1.0 / 3.0);
  CHECK(spec.optim.min_lr == 6e-5);
  CHECK(spec.optim.decay == sg::LrDecay::Linear);
  CHECK(spec.optim.betas[0] == 0.9);
  CHECK(spec.optim.betas[1] == 0.99);
  CHECK(spec.optim.eps == 1e-10);
  CHECK(spec.optim.grad_clip == 0);
  CHECK(spec.train.seq_len == 128);
  CHECK(spec.train.precision == sg::Precision::BF16);
  CHECK(spec.train.recompute == sg::Recompute::Selective);
  CHECK(spec.train.deterministic);
  CHECK(spec.eval.every == 250);
  CHECK(spec.eval.steps == 20);
  CHECK(spec.parallel.data == 8);
  CHECK(spec.parallel.tensor == 2);
  CHECK(spec.parallel.pipeline == 2);
  CHECK(spec.parallel.schedule == sg::PipelineSchedule::GPipe);
  CHECK(spec.parallel.zero == 2);
  CHECK(spec.devices.backend == sg::BackendKind::Cuda);
  CHECK(spec.devices.processes == 16);
  CHECK(spec.devices.threads == 0);
  CHECK(spec.devices.peak_tflops == 989.5);
  CHECK(spec.checkpoint.keep == 0);
  CHECK(spec.checkpoint.resume == "never");
  CHECK(spec.log.dir == "/tmp/run");
  CHECK(spec.log.every == 5);
  CHECK(spec.source == "full.yaml");
}

TEST_CASE("an empty spec takes every default; log.dir defaults to runs/<name>") {
  JobSpec spec = parse_job_spec("", "empty.yaml", {});
  JobSpec defaults;
  defaults.log.dir = "runs/job";
  CHECK(differing_keys(spec, defaults).empty());
  CHECK(spec.log.dir == "runs/job");

  JobSpec named = parse_job_spec("name: tiny\noptim:\nlog: {every: 2}\n", "x.yaml", {});
  CHECK(named.log.dir == "runs/tiny");
  CHECK(named.optim.lr == 6e-4);
  CHECK(named.log.every == 2);
  CHECK(named.devices.threads == 0);
}

TEST_CASE("devices.threads takes a count or auto") {
  CHECK(parse_job_spec("devices: {threads: 3}", "x.yaml", {}).devices.threads == 3);
  CHECK(parse_job_spec("devices: {threads: auto}", "x.yaml", {}).devices.threads == 0);
}

TEST_CASE("round trip through job_spec_to_yaml is bit-exact") {
  JobSpec spec = parse_job_spec(kFullSpec, "full.yaml", {});
  // Awkward values: no short decimal is exact for these.
  spec.optim.lr = 1.0 / 3.0;
  spec.optim.min_lr = 6e-4;
  spec.optim.weight_decay = 0.1;
  spec.optim.betas = {0.1 + 0.2, std::nextafter(0.95, 1.0)};
  spec.devices.peak_tflops = 1e300 / 7;
  spec.model.as<GPT2Config>().init_std = 1.0f / 3.0f;
  spec.seed = 18446744073709551615ull;
  spec.data.synthetic_train_tokens = int64_t{1} << 40;
  spec.data.train = "odd \"quoted\" path\\with\ttab";
  spec.checkpoint.resume = "null";
  spec.name = "1e3";

  std::string yaml = job_spec_to_yaml(spec);
  JobSpec back = parse_job_spec(yaml, "resolved.yaml", {});
  CHECK(differing_keys(spec, back).empty());
  CHECK(back.optim.betas[0] == 0.1 + 0.2);
  CHECK(back.data.train == spec.data.train);
  CHECK(back.checkpoint.resume == "null");
  // Written again, it is the same text: the writer is a fixed point.
  CHECK(job_spec_to_yaml(back) == yaml);
  CHECK(yaml.find("threads: auto") != std::string::npos);
}

TEST_CASE("round trip writes every key, defaults included") {
  std::string yaml = job_spec_to_yaml(parse_job_spec("", "x.yaml", {}));
  for (const JobSpecKey& key : job_spec_keys("gpt2")) {
    std::string leaf(key.leaf());
    CHECK_MESSAGE(yaml.find(leaf + ":") != std::string::npos, key.path);
  }
  CHECK(yaml.find("log:\n  dir: \"runs/job\"") != std::string::npos);
  // Only the job's own family's keys: a GPT-2 job has no depth.
  CHECK(yaml.find("depth:") == std::string::npos);
}

TEST_CASE("a family's keys belong to its model.arch") {
  // The resolved spec of a ResNet job carries ResNet's keys, and reads back to the same spec.
  JobSpec resnet = parse_job_spec(
      "model: {arch: resnet, depth: 18, label_smoothing: 0.1}\n"
      "data: {dataset: synthetic}\n", "x.yaml", {});
  CHECK(resnet.model.as<ResNetConfig>().depth == 18);
  CHECK(resnet.model.config().data().input == ModelInput::Images);
  std::string yaml = job_spec_to_yaml(resnet);
  CHECK(yaml.find("  depth: 18\n") != std::string::npos);
  CHECK(yaml.find("n_layer:") == std::string::npos);
  CHECK(sg::test::differing_keys(resnet, parse_job_spec(yaml, "resolved.yaml", {})).empty());
  // Another family's key is refused where it was written, naming whose key it is.
  CHECK(sg::test::spec_error("model: {arch: resnet, n_layer: 4}\n")
            .starts_with("job.yaml:1:23: model.n_layer is a key of model.arch gpt2 or llama, not of "
                         "resnet"));
  CHECK(sg::test::spec_error("model: {depth: 18}\n", {"model.arch=gpt2"})
            .starts_with("job.yaml:1:9: model.depth is a key of model.arch resnet, not of gpt2"));
  // An override of model.arch selects that family's defaults for the rest, and leaves the
  // file's keys of its own family unused (an override naming one is still refused).
  JobSpec switched = parse_job_spec("model: {arch: gpt2, n_layer: 4}\n", "x.yaml",
                                    {"model.arch=resnet", "data.dataset=synthetic"});
  CHECK(switched.model.as<ResNetConfig>().depth == 50);
  CHECK(job_spec_to_yaml(switched).find("n_layer") == std::string::npos);
  CHECK(sg::test::spec_error("", {"model.arch=resnet", "model.n_layer=4"})
            .starts_with("--set model.n_layer=4: model.n_layer is a key of model.arch gpt2"));
  CHECK(sg::test::spec_error("", {"model.arch=resnett"})
            .starts_with("--set model.arch=resnett: model.arch must be one of gpt2, llama, resnet; "
                         "got "
                         "'resnett'; did you mean 'resnet'?"));
}

TEST_CASE("overrides apply after the file, later ones win") {
  JobSpec spec = parse_job_spec(
      "optim: {lr: 1e-3}\ntrain: {global_batch: 16, micro_batch: 4}\n", "x.yaml",
      {"optim.lr=3e-4", "optim.betas=[0.9,0.99]", "train.deterministic=true",
       "parallel.data=2", "parallel.data = 4", "name=my-run", "devices.threads=auto",
       "data.train=*.bin", "data.val=", "checkpoint.resume=runs/x/checkpoints/step_00000010"});
  CHECK(spec.optim.lr == 3e-4);
  CHECK(spec.optim.betas[1] == 0.99);
  CHECK(spec.train.deterministic);
  CHECK(spec.parallel.data == 4);
  CHECK(spec.name == "my-run");
  CHECK(spec.log.dir == "runs/my-run");  // the default follows the overridden name
  CHECK(spec.data.train == "*.bin");      // a glob is not a YAML alias
  CHECK(spec.data.val.empty());
  CHECK(spec.checkpoint.resume == "runs/x/checkpoints/step_00000010");
}

TEST_CASE("load_job_spec reads a file and names it as the source") {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("test_config_" + std::to_string(::getpid()) + ".yaml")).string();
  {
    std::ofstream out(path);
    out << "name: from-file\ntrain:\n  steps: ten\n";
  }
  std::string message;
  try {
    load_job_spec(path, {});
  } catch (const SpecError& e) {
    message = e.what();
  }
  CHECK(message == path + ":3:3: expected an integer for 'train.steps', got 'ten'");
  JobSpec spec = load_job_spec(path, {"train.steps=7"});
  CHECK(spec.train.steps == 7);
  CHECK(spec.source == path);
  std::remove(path.c_str());

  CHECK_THROWS_AS(load_job_spec("no/such/job.yaml", {}), SpecError);
}
