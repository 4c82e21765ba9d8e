// Bad job specs: every error class gives one line with the right FILE:LINE:COL and a hint.
#include "spec_test_util.h"

using namespace sg;
using sg::test::spec_error;

TEST_CASE("YAML syntax errors carry the parser's line and column, 1-based") {
  // The second ':' on line 1 is the 5th character: yaml-cpp's 0-based mark (0, 4) + 1.
  CHECK(spec_error("a: b: c\n") == "job.yaml:1:5: YAML syntax error: illegal map value");
  // An unclosed flow sequence: the parser gives up at the end of the text (line 4).
  CHECK(spec_error("name: x\nmodel:\n  n_layer: [1, 2\n") ==
        "job.yaml:4:1: YAML syntax error: end of sequence flow not found");
  std::string message = spec_error("train:\n  steps: 3\n micro_batch: [\n");
  CHECK(message.rfind("job.yaml:", 0) == 0);
  CHECK(message.find(": YAML syntax error: ") != std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("unknown keys suggest the nearest known key") {
  CHECK(spec_error("seed: 1\noptim:\n  lr: 1e-3\n  lrr: 1\n") ==
        "job.yaml:4:3: unknown key 'optim.lrr'; did you mean 'optim.lr'?");
  CHECK(spec_error("optm:\n  lr: 1\n") == "job.yaml:1:1: unknown key 'optm'; did you mean 'optim'?");
  CHECK(spec_error("train:\n  stpes: 1\n") ==
        "job.yaml:2:3: unknown key 'train.stpes'; did you mean 'train.steps'?");
  // Right name, wrong section.
  CHECK(spec_error("train:\n  lr: 1\n") ==
        "job.yaml:2:3: unknown key 'train.lr'; did you mean 'optim.lr'?");
  // Nothing close: no suggestion.
  CHECK(spec_error("optim:\n  zzzzzz: 1\n") == "job.yaml:2:3: unknown key 'optim.zzzzzz'");
  CHECK(spec_error("colour: red\n") == "job.yaml:1:1: unknown key 'colour'");
  // Flow maps point at the key inside the braces.
  CHECK(spec_error("eval: {every: 1, stepz: 2}\n") ==
        "job.yaml:1:18: unknown key 'eval.stepz'; did you mean 'eval.steps'?");
}

TEST_CASE("duplicate keys and sections are errors, not silently merged") {
  CHECK(spec_error("optim:\n  lr: 1\n  lr: 2\n") ==
        "job.yaml:3:3: duplicate key 'optim.lr' (first at line 2); keep one");
  CHECK(spec_error("eval: {every: 1}\nname: a\neval: {steps: 1}\n") ==
        "job.yaml:3:1: duplicate section 'eval' (first at line 1); merge the two");
}

TEST_CASE("the document and sections must be maps") {
  CHECK(spec_error("- a\n- b\n").rfind("job.yaml:1:1: expected a map of keys", 0) == 0);
  CHECK(spec_error("name: x\noptim: 3\n") ==
        "job.yaml:2:1: expected a map of keys under 'optim', got '3'");
}

TEST_CASE("wrong types name the key, the expected type and what was given") {
  CHECK(spec_error("name: x\ntrain:\n  steps: ten\n") ==
        "job.yaml:3:3: expected an integer for 'train.steps', got 'ten'");
  CHECK(spec_error("train: {steps: 2.5}") ==
        "job.yaml:1:9: expected an integer for 'train.steps', got '2.5'");
  CHECK(spec_error("train: {deterministic: maybe}") ==
        "job.yaml:1:9: expected a bool (true or false) for 'train.deterministic', got 'maybe'");
  CHECK(spec_error("optim: {lr: fast}") == "job.yaml:1:9: expected a float for 'optim.lr', got 'fast'");
  CHECK(spec_error("name: [a, b]") == "job.yaml:1:1: expected a string for 'name', got a list");
  CHECK(spec_error("optim: {betas: [0.9]}") ==
        "job.yaml:1:9: expected a list of 2 floats for 'optim.betas', got 1 item");
  CHECK(spec_error("optim: {betas: 0.9}") ==
        "job.yaml:1:9: expected a list of 2 floats for 'optim.betas', got '0.9'");
  CHECK(spec_error("optim: {betas: [0.9, x]}") ==
        "job.yaml:1:9: expected a list of 2 floats for 'optim.betas', got 'x'");
  CHECK(spec_error("devices: {threads: many}") ==
        "job.yaml:1:11: expected an integer or auto for 'devices.threads', got 'many'");
  CHECK(spec_error("seed: -1") == "job.yaml:1:1: expected a non-negative integer for 'seed', got '-1'");
  CHECK(spec_error("train:\n  steps:\n") ==
        "job.yaml:2:3: expected an integer for 'train.steps', got nothing");
  CHECK(spec_error("train: {steps: 99999999999}") ==
        "job.yaml:1:9: 'train.steps' value 99999999999 is out of range [-2147483648, 2147483647]");
}

TEST_CASE("out-of-range values and bad enums name the allowed values") {
  CHECK(spec_error("optim:\n  decay: cosin\n") ==
        "job.yaml:2:3: optim.decay must be one of cosine, linear, step, constant; got 'cosin'; "
        "did you mean 'cosine'?");
  CHECK(spec_error("optim: {lr: 0}") == "job.yaml:1:9: optim.lr must be > 0; got 0");
  CHECK(spec_error("optim: {lr: 1e-3, min_lr: 2e-3}") ==
        "job.yaml:1:19: optim.min_lr 0.002 exceeds optim.lr 0.001; need 0 <= min_lr <= lr");
  CHECK(spec_error("optim: {min_lr: -1}") == "job.yaml:1:9: optim.min_lr must be >= 0; got -1");
  CHECK(spec_error("optim: {betas: [0.9, 1.0]}") ==
        "job.yaml:1:9: optim.betas must lie in [0, 1); got [0.9, 1]");
  CHECK(spec_error("optim: {grad_clip: -1}") == "job.yaml:1:9: optim.grad_clip must be >= 0; got -1");
  CHECK(spec_error("train: {steps: 0}") == "job.yaml:1:9: train.steps must be >= 1; got 0");
  CHECK(spec_error("checkpoint: {keep: -1}") == "job.yaml:1:14: checkpoint.keep must be >= 0; got -1");
  CHECK(spec_error("parallel: {tensor: 0}") == "job.yaml:1:12: parallel.tensor must be >= 1; got 0");
  CHECK(spec_error("parallel: {zero: 3}") == "job.yaml:1:12: parallel.zero must be 0, 1 or 2; got 3");
  CHECK(spec_error("parallel: {schedule: 1F1B}") ==
        "job.yaml:1:12: parallel.schedule must be one of gpipe, 1f1b; got '1F1B'; "
        "did you mean '1f1b'?");
  CHECK(spec_error("train: {recompute: some}") ==
        "job.yaml:1:9: train.recompute must be one of none, selective, full; got 'some'");
  CHECK(spec_error("train: {precision: fp8}").rfind(
            "job.yaml:1:9: train.precision must be one of fp32, bf16, fp16", 0) == 0);
  CHECK(spec_error("devices: {backend: tpu}") ==
        "job.yaml:1:11: devices.backend must be one of cpu, cuda; got 'tpu'");
  CHECK(spec_error("model:\n  n_head: 12\n  n_embd: 770\n") ==
        "job.yaml:3:3: model.n_embd 770 is not divisible by model.n_head 12; use 768");
  CHECK(spec_error("model: {context: 64}\ntrain: {seq_len: 128}\n") ==
        "job.yaml:2:9: train.seq_len 128 exceeds model.context 64; use at most 64 (or 0 for the "
        "context length)");
  CHECK(spec_error("data: {dataset: tokens, train: t.bin, val: v.bin}\nmodel: {vocab: 70000}\n")
            .rfind("job.yaml:2:9: model.vocab 70000 exceeds 65536", 0) == 0);
  // The synthetic chain's tokens are uint16 too (data/markov_chain.h): 70000 would wrap.
  CHECK(spec_error("data: {dataset: synthetic}\nmodel: {vocab: 70000}\n") ==
        "job.yaml:2:9: model.vocab must be <= 65536; got 70000 (synthetic tokens are stored in "
        "16 bits)");
  CHECK(spec_error("data: {dataset: synthetic}\nmodel: {vocab: 65536}\n") == "");
}

TEST_CASE("the job name must be usable as a directory name") {
  CHECK(spec_error("name: \"my job\"").rfind(
            "job.yaml:1:1: name 'my job' is not usable as a directory name", 0) == 0);
  CHECK(spec_error("name: ..").rfind("job.yaml:1:1: name '..' is not usable", 0) == 0);
  CHECK(spec_error("name: a/b").rfind("job.yaml:1:1: name 'a/b' is not usable", 0) == 0);
  CHECK(spec_error("name: \"\"").rfind("job.yaml:1:1: name is empty", 0) == 0);
  CHECK(spec_error("name: gpt2-124m_v1.0") == "");
}

TEST_CASE("a batch or mesh that does not divide says what would") {
  CHECK(spec_error("train: {global_batch: 30, micro_batch: 4}\nparallel: {data: 2}\n") ==
        "job.yaml:1:9: train.global_batch 30 is not divisible by parallel.data (2) x "
        "train.micro_batch (4) = 8; use 32");
  // global_batch left at its default (512): the error points at the key the user did write.
  CHECK(spec_error("name: x\nparallel: {data: 3}\n") ==
        "job.yaml:2:12: train.global_batch 512 is not divisible by parallel.data (3) x "
        "train.micro_batch (8) = 24; use 504");
  CHECK(spec_error("parallel: {data: 8, tensor: 2, pipeline: 2}\ndevices: {processes: 6}\n") ==
        "job.yaml:2:11: devices.processes 6 is not divisible by parallel.tensor (2) x "
        "parallel.pipeline (2) = 4; use 8");
  CHECK(spec_error("parallel: {data: 3, tensor: 2}\ndevices: {processes: 4}\ntrain: {global_batch: 24}\n") ==
        "job.yaml:1:12: parallel.data 3 is not divisible by the 2 data-parallel processes "
        "(devices.processes 4 / 2); use parallel.data 4");
  CHECK(spec_error("parallel: {tensor: 5}\n").rfind(
            "job.yaml:1:12: model.n_head 12 is not divisible by parallel.tensor 5", 0) == 0);
  CHECK(spec_error("parallel: {pipeline: 2}\nmodel: {n_layer: 1}\ndevices: {processes: 2}\n")
            .rfind("job.yaml:1:12: parallel.pipeline 2 exceeds model.n_layer 1", 0) == 0);
  // A layout that divides: 16 replicas folded onto 4 data-parallel processes.
  CHECK(spec_error("parallel: {data: 16, tensor: 2}\ndevices: {processes: 8}\n") == "");
}

TEST_CASE("shard datasets need train and val globs; synthetic needs neither") {
  CHECK(spec_error("data:\n  dataset: wikipedia\n  val: v.bin\n") ==
        "job.yaml:2:3: data.dataset wikipedia needs data.train, a glob of token shards "
        "(e.g. data/wikipedia/train_*.bin)");
  CHECK(spec_error("data:\n  dataset: openwebtext\n  train: t.bin\n").rfind(
            "job.yaml:2:3: data.dataset openwebtext needs data.val", 0) == 0);
  CHECK(spec_error("data: {dataset: synthetic}") == "");
  // Images for a GPT: refused, naming both keys.
  CHECK(spec_error("data: {dataset: imagenet}").find("holds images but model.arch gpt2 reads tokens") !=
        std::string::npos);
}

TEST_CASE("ResNet keys: depth, sizes, dataset kind, tensor parallelism, deterministic mode") {
  const std::string resnet = "model: {arch: resnet}\ndata: {dataset: synthetic}\n";
  CHECK(spec_error(resnet) == "");
  CHECK(spec_error(resnet, {"model.depth=42"}).find("model.depth must be 18, 34, 50, 101 or 152") !=
        std::string::npos);
  CHECK(spec_error(resnet, {"model.image_size=16"}).find("model.image_size must be >= 32") !=
        std::string::npos);
  CHECK(spec_error(resnet, {"model.label_smoothing=1.5"}).find("[0, 1)") != std::string::npos);
  CHECK(spec_error(resnet, {"data.dataset=tokens"}).find("holds tokens but model.arch resnet") !=
        std::string::npos);
  CHECK(spec_error(resnet, {"data.dataset=imagenet"}).find("needs data.root") != std::string::npos);
  CHECK(spec_error(resnet, {"parallel.tensor=2", "devices.processes=2"})
            .find("a ResNet has no tensor parallelism") != std::string::npos);
  CHECK(spec_error(resnet, {"train.deterministic=true"}).find("needs devices.threads set") !=
        std::string::npos);
  CHECK(spec_error(resnet, {"train.deterministic=true", "devices.threads=1", "model.sync_bn=true"})
            .find("train.deterministic with model.sync_bn") != std::string::npos);
  CHECK(spec_error(resnet, {"optim.name=sgd", "optim.momentum=1.5"}).find("optim.momentum") !=
        std::string::npos);
  CHECK(spec_error(resnet, {"optim.decay=step"}).find("optim.decay_every") != std::string::npos);
}

TEST_CASE("overrides are type-checked and located at the --set") {
  CHECK(spec_error("", {"optim.lrr=3e-4"}) ==
        "--set optim.lrr=3e-4: unknown key 'optim.lrr'; did you mean 'optim.lr'?");
  CHECK(spec_error("", {"train.steps=ten"}) ==
        "--set train.steps=ten: expected an integer for 'train.steps', got 'ten'");
  CHECK(spec_error("", {"optim.lr"}) == "--set optim.lr: expected KEY=VALUE, e.g. --set optim.lr=3e-4");
  CHECK(spec_error("", {"eval=3"}).rfind("--set eval=3: 'eval' is a section; set one of its keys", 0) == 0);
  CHECK(spec_error("", {"optim.betas=[0.9,"}).rfind("--set optim.betas=[0.9,: YAML syntax error", 0) == 0);
  CHECK(spec_error("", {"optim.betas=[0.9,0.99,0.999]"}) ==
        "--set optim.betas=[0.9,0.99,0.999]: expected a list of 2 floats for 'optim.betas', got 3 items");
  // A validation error caused by an override points at the override, not the file.
  CHECK(spec_error("train: {steps: 5}\n", {"train.steps=0"}) ==
        "--set train.steps=0: train.steps must be >= 1; got 0");
}

TEST_CASE("validate_job_spec alone names the key and the source") {
  JobSpec spec;
  spec.log.dir = "runs/job";
  CHECK_NOTHROW(validate_job_spec(spec));
  spec.train.global_batch = 30;
  spec.train.micro_batch = 4;
  spec.parallel.data = 2;
  spec.source = "edited.yaml";
  CHECK_THROWS_WITH_AS(validate_job_spec(spec),
                       "edited.yaml: train.global_batch 30 is not divisible by parallel.data (2) x "
                       "train.micro_batch (4) = 8; use 32",
                       SpecError);
  JobSpec no_dir;
  CHECK_THROWS_WITH_AS(validate_job_spec(no_dir),
                       "job spec: log.dir is empty; set it, or leave it out for runs/<name>", SpecError);
  fill_job_spec_defaults(no_dir);
  CHECK_NOTHROW(validate_job_spec(no_dir));
}
