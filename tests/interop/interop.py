"""Weights in and out (README "Weights in and out") against Hugging Face transformers and
torchvision. Run by run_interop.sh under the interop venv:

    interop.py SINGULARITY_BIN CASE

CASE:
  gpt2_import         a random tiny GPT-2 saved by transformers' save_pretrained is our run's
                      model.init_from: our step-0 validation loss equals transformers' mean
                      cross-entropy on the same windows (relative 1e-5), on one process and on
                      tensor- and pipeline-parallel meshes of two; exporting the job's starting weights gives
                      transformers' tensors back bit for bit; a shape mismatch is refused.
  gpt2_export         a tiny GPT-2 trained a few steps, exported with --format hf, loads in
                      GPT2LMHeadModel.from_pretrained and gives our validation loss (relative
                      1e-5); init_from the export (or the checkpoint) and export again is the
                      identity; wrong format/model combinations exit 2 with one error line.
  gpt2_generate       a tiny GPT-2 (transformers' random weights, trained a step), exported with
                      --format hf: `sample --temperature 0` gives the token ids of transformers'
                      greedy generate(do_sample=False) for each prompt of a --prompts file;
                      top-k 1 is greedy; a seed repeats a sampled run; bad values exit 2 with
                      one error line.
  llama_import, llama_export, llama_generate
                      the same three for model.arch llama against transformers'
                      LlamaForCausalLM (grouped-query attention, rotary positions, a tied head;
                      the import case also an untied one).
  resnet_torchvision  a random torchvision resnet18(num_classes=10) state dict is model.init_from:
                      our step-0 validation loss (evaluation mode, running statistics) equals
                      torchvision's on the same synthetic images (re-generated here bit for bit
                      from data/synthetic_images.cpp); the job's export is the state dict again;
                      a trained checkpoint exported with --format torchvision loads with
                      load_state_dict(strict=True).

Both sides see the same validation windows: the validation shard holds exactly
eval.steps * micro_batch windows of seq_len + 1 tokens, and one evaluation reads sequences
0 .. N-1, which the sampler maps to a permutation of all N windows; the mean over equal
micro-batches is then the mean over all windows, whatever the order.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import safetensors.torch
    import torch
    import torch.nn.functional as F
    import torchvision
    import transformers
except ImportError as e:  # the venv lacks a package: skipped, not failed
    print(f"skipped: the interop venv lacks {e.name} (rerun scripts/setup)")
    sys.exit(77)

BIN, CASE = sys.argv[1], sys.argv[2]
# float32 on both sides, summed in different orders: 1e-5 relative on a mean loss of ~4.
LOSS_RTOL = 1e-5
torch.set_num_threads(2)
failures = []


def check(ok, message):
    print(("ok: " if ok else "FAIL: ") + message, flush=True)
    if not ok:
        failures.append(message)


def run(*args, expect=0, mpi=0):
    cmd = [BIN, *args]
    if mpi:
        flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.getuid() == 0 else [])
        cmd = ["mpirun", *flags, "-np", str(mpi), *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != expect:
        print(p.stdout[-3000:], p.stderr[-3000:], sep="\n")
        raise SystemExit(f"FAIL: {' '.join(args)} exited {p.returncode}, want {expect}")
    return p


def write_shard(path, tokens):
    """llm.c's token shard (data/token_shard.h): int32 header[256], then uint16 tokens."""
    header = np.zeros(256, np.int32)
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, np.uint16).tobytes())


def val_loss(run_dir, step):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if "val_loss" in record and record["step"] == step:
                return float(record["val_loss"])
    raise SystemExit(f"FAIL: no val_loss for step {step} in {run_dir}/metrics.jsonl")


def relative(a, b):
    return abs(a - b) / abs(b)


def same_tensors(a_path, b_path):
    a, b = safetensors.torch.load_file(a_path), safetensors.torch.load_file(b_path)
    if sorted(a) != sorted(b):
        return f"names differ: {sorted(set(a) ^ set(b))}"
    for name in a:
        if a[name].dtype != b[name].dtype or a[name].shape != b[name].shape:
            return f"{name}: {a[name].dtype} {tuple(a[name].shape)} vs {b[name].dtype} {tuple(b[name].shape)}"
        if not torch.equal(a[name], b[name]):
            return f"{name}: values differ (max {float((a[name] - b[name]).abs().max())})"
    return ""


# ---------------------------------------------------------------------------------------- GPT-2

N_LAYER, N_HEAD, N_EMBD, CONTEXT, VOCAB = 2, 2, 32, 16, 64
MICRO, EVAL_STEPS = 4, 4
WINDOWS = MICRO * EVAL_STEPS


def gpt2_data(work):
    rng = np.random.default_rng(5)
    data = os.path.join(work, "data")
    os.makedirs(data)
    write_shard(os.path.join(data, "train_000.bin"), rng.integers(0, VOCAB, 4096))
    val = rng.integers(0, VOCAB, WINDOWS * CONTEXT + 1)  # exactly WINDOWS windows
    write_shard(os.path.join(data, "val_000.bin"), val)
    return data, torch.tensor(val.astype(np.int64))


# The decoder families' model sections for the tiny jobs: GPT-2's, and a Llama of the same width
# whose 4 query heads share 2 key/value heads.
MODEL_KEYS = {
    "gpt2": f"arch: gpt2, n_layer: {N_LAYER}, n_head: {N_HEAD}, n_embd: {N_EMBD}",
    "llama": f"arch: llama, n_layer: {N_LAYER}, n_head: 4, n_kv_head: 2, n_embd: {N_EMBD}, "
             "intermediate_size: 48",
}


def gpt2_job(work, data, name, init_from="", steps=1, lr=1e-3, arch="gpt2", extra=""):
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write(f"""name: {name}
seed: 7
model: {{{MODEL_KEYS[arch]}, context: {CONTEXT}, vocab: {VOCAB}, init_from: "{init_from}"{extra}}}
data:
  dataset: tokens
  train: {data}/train_*.bin
  val: {data}/val_*.bin
optim:
  lr: {lr}
  min_lr: 0
  warmup_steps: 0
  decay: constant
train:
  steps: {steps}
  global_batch: {MICRO}
  micro_batch: {MICRO}
eval:
  every: 0
  steps: {EVAL_STEPS}
checkpoint:
  every: 0
log:
  dir: {work}/runs/{name}
devices:
  threads: 2
""")
    return path


def hf_val_loss(model, val):
    """transformers' mean cross-entropy over the validation windows, in float64."""
    x = torch.stack([val[i * CONTEXT:i * CONTEXT + CONTEXT] for i in range(WINDOWS)])
    y = torch.stack([val[i * CONTEXT + 1:i * CONTEXT + CONTEXT + 1] for i in range(WINDOWS)])
    model.eval()
    with torch.no_grad():
        logits = model(x).logits.double()
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)))


def random_hf_llama(path, tied=True):
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=N_EMBD, intermediate_size=48,
                                      num_hidden_layers=N_LAYER, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=CONTEXT,
                                      rms_norm_eps=1e-5, rope_theta=10000.0,
                                      tie_word_embeddings=tied)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # norms away from 1, weights larger than 0.02: each one matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(path)
    return model


# What the cases need of each decoder family: transformers' class, a random model saved by
# save_pretrained, the config.json keys our export must give back, and a shape mismatch.
FAMILIES = {
    "gpt2": dict(title="GPT-2", hf=lambda: transformers.GPT2LMHeadModel, random=lambda p: random_hf_gpt2(p),
                 config_keys=["vocab_size", "n_positions", "n_embd", "n_layer", "n_head",
                              "activation_function", "layer_norm_epsilon"],
                 mismatch=("model.n_layer=3", "n_layer is 2 but the job has model.n_layer 3")),
    "llama": dict(title="Llama", hf=lambda: transformers.LlamaForCausalLM, random=lambda p: random_hf_llama(p),
                  config_keys=["vocab_size", "max_position_embeddings", "hidden_size",
                               "intermediate_size", "num_hidden_layers", "num_attention_heads",
                               "num_key_value_heads", "rms_norm_eps", "rope_theta",
                               "tie_word_embeddings", "hidden_act"],
                  mismatch=("model.n_kv_head=4", "num_key_value_heads is 2 but the job has "
                                                 "model.n_kv_head 4")),
}


def random_hf_gpt2(path):
    config = transformers.GPT2Config(n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD,
                                     n_positions=CONTEXT, vocab_size=VOCAB)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():  # biases and layer norms away from 0 and 1, so each one matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(path)
    return model


def case_text_import(work, arch):
    family = FAMILIES[arch]
    data, val = gpt2_data(work)
    hf_dir = os.path.join(work, "hf")
    model = family["random"](hf_dir)
    theirs = hf_val_loss(model, val)

    job = gpt2_job(work, data, "imported", init_from=hf_dir, arch=arch)
    log = run("train", job).stdout
    check(f"initialised from Hugging Face {family['title']}" in log,
          "the run says where its weights came from")
    ours = val_loss(os.path.join(work, "runs/imported"), 0)
    print(f"step-0 val loss: singularity {ours:.9f}, transformers {theirs:.9f}, "
          f"relative difference {relative(ours, theirs):.2e}")
    check(relative(ours, theirs) < LOSS_RTOL, f"init_from a transformers {family['title']}: same validation loss")

    # Any mesh: two processes, each holding half of every layer (tensor parallelism) or one of
    # the two layers (pipeline parallelism, the last stage with its copy of the tied wte).
    if shutil.which("mpirun"):
        for axis in ["tensor", "pipeline"]:
            run("train", job, "--set", "log.dir=" + os.path.join(work, "runs", axis),
                "--set", "devices.processes=2", "--set", f"parallel.{axis}=2", mpi=2)
            split = val_loss(os.path.join(work, "runs", axis), 0)
            print(f"step-0 val loss on parallel.{axis} 2: {split:.9f}, relative difference "
                  f"{relative(split, theirs):.2e}")
            check(relative(split, theirs) < LOSS_RTOL, f"init_from on a {axis}-parallel mesh")
    else:
        print("note: no mpirun, the tensor-parallel init_from check is left out")

    # export(init_from(x)) == x: the job's starting weights, exported, are transformers' tensors.
    out = os.path.join(work, "export")
    run("export", job, out, "--format", "hf")
    diff = same_tensors(os.path.join(hf_dir, "model.safetensors"), os.path.join(out, "model.safetensors"))
    check(diff == "", "export of the imported weights is save_pretrained's file, bitwise " + diff)
    ours_config = json.load(open(os.path.join(out, "config.json")))
    theirs_config = json.load(open(os.path.join(hf_dir, "config.json")))
    for key in family["config_keys"] + ["model_type", "architectures"]:
        check(ours_config[key] == theirs_config[key], f"config.json {key}")

    # A job of another shape is refused, naming the key; a pytorch_model.bin is not read.
    setting, words = family["mismatch"]
    p = run("train", job, "--set", setting, "--set", "log.dir=" + work + "/runs/bad", expect=2)
    check(words in p.stderr, "shape mismatch: " + p.stderr.strip())
    bin_dir = os.path.join(work, "bin_only")
    os.makedirs(bin_dir)
    shutil.copy(os.path.join(hf_dir, "config.json"), bin_dir)
    open(os.path.join(bin_dir, "pytorch_model.bin"), "wb").close()
    p = run("train", job, "--set", "model.init_from=" + bin_dir, "--set",
            "log.dir=" + work + "/runs/bad2", expect=2)
    check("pytorch_model.bin is not read" in p.stderr, "pytorch_model.bin refused: " + p.stderr.strip())
    if arch == "llama":  # an untied head loads into model.tie_embeddings: false, and only there
        untied = os.path.join(work, "untied")
        theirs = hf_val_loss(random_hf_llama(untied, tied=False), val)
        job = gpt2_job(work, data, "untied", init_from=untied, arch=arch,
                       extra=", tie_embeddings: false")
        run("train", job)
        ours = val_loss(os.path.join(work, "runs/untied"), 0)
        check(relative(ours, theirs) < LOSS_RTOL, f"untied head: {ours:.9f} vs {theirs:.9f}")
        p = run("train", job, "--set", "model.tie_embeddings=true", "--set",
                "log.dir=" + work + "/runs/bad3", expect=2)
        check("set model.tie_embeddings: false" in p.stderr, "untied into tied refused: " + p.stderr.strip())


def case_text_export(work, arch):
    family = FAMILIES[arch]
    data, val = gpt2_data(work)
    steps = 3
    job = gpt2_job(work, data, "trained", steps=steps, lr=1e-2, arch=arch)
    run("train", job)
    run_dir = os.path.join(work, "runs/trained")
    ours = val_loss(run_dir, steps)
    check(ours != val_loss(run_dir, 0), "training moved the validation loss")

    out = os.path.join(work, "hf")
    tokenizer = os.path.join(os.environ.get("SINGULARITY_TEST_DATA", "/nonexistent"), "gpt2")
    has_tokenizer = os.path.isfile(os.path.join(tokenizer, "encoder.json"))
    run("export", run_dir, out, "--format", "hf", *(["--tokenizer", tokenizer] if has_tokenizer else []))
    model = family["hf"]().from_pretrained(out)
    theirs = hf_val_loss(model, val)
    print(f"val loss after {steps} steps: singularity {ours:.9f}, transformers {theirs:.9f}, "
          f"relative difference {relative(ours, theirs):.2e}")
    check(relative(ours, theirs) < LOSS_RTOL, "exported checkpoint: transformers gives our validation loss")
    printed = run("eval", "--checkpoint", run_dir).stdout
    eval_loss = float(printed.split("val loss ")[1].split(",")[0])
    check(abs(eval_loss - theirs) < 6e-5, f"singularity eval prints {eval_loss} (4 decimals)")
    if has_tokenizer:
        tok = transformers.GPT2TokenizerFast.from_pretrained(out)
        check(tok("Hello world")["input_ids"] == [15496, 995], "the exported tokenizer encodes as GPT-2")
    else:
        print("note: SINGULARITY_TEST_DATA has no gpt2/ tokenizer, --tokenizer is left out")

    # init_from the export, or from the checkpoint itself, then export: the same tensors.
    for name, source in [("from_hf", out), ("from_checkpoint", run_dir)]:
        again = os.path.join(work, "again_" + name)
        run("export", gpt2_job(work, data, name, init_from=source, arch=arch), again, "--format", "hf")
        diff = same_tensors(os.path.join(out, "model.safetensors"), os.path.join(again, "model.safetensors"))
        check(diff == "", f"export(init_from({name})) is the export, bitwise {diff}")

    p = run("export", run_dir, os.path.join(work, "tv"), "--format", "torchvision", expect=2)
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1 and lines[0].startswith("error: --format torchvision exports ResNet"),
          f"{family['title']} with --format torchvision refused: " + p.stderr.strip())


def sample_generated(printed):
    """The token ids of each `generated:` line of `singularity sample`."""
    return [[int(t) for t in line.split()[1:]] for line in printed.splitlines()
            if line.startswith("generated:")]


def case_text_generate(work, arch):
    family = FAMILIES[arch]
    data, _ = gpt2_data(work)
    hf_dir = os.path.join(work, "hf_init")
    family["random"](hf_dir)  # weights far from ties, so one rounding cannot flip a greedy pick
    job = gpt2_job(work, data, "generate", init_from=hf_dir, steps=1, arch=arch)
    run("train", job)
    run_dir = os.path.join(work, "runs/generate")
    out = os.path.join(work, "hf")
    run("export", run_dir, out, "--format", "hf")
    model = family["hf"]().from_pretrained(out)
    model.eval()
    # Generate for exactly max_new_tokens: no end-of-text stop, as singularity has none.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0

    prompts = [[1, 2, 3], [10, 20, 30, 40, 50], [63]]
    new_tokens = CONTEXT - max(len(p) for p in prompts)  # the whole context, as transformers allows
    prompts_file = os.path.join(work, "prompts.txt")
    with open(prompts_file, "w") as f:  # ids as spaces, commas; a blank line is skipped
        f.write("1 2 3\n10,20,30,40,50\n\n63\n")
    printed = run("sample", "--checkpoint", run_dir, "--prompts", prompts_file, "--temperature", "0",
                  "--tokens", str(new_tokens)).stdout
    ours = sample_generated(printed)
    check(len(ours) == len(prompts), f"one generated line per prompt ({len(ours)})")
    check("tokens/s" in printed, "sample prints its speed")
    with torch.no_grad():
        for prompt, generated in zip(prompts, ours):
            theirs = model.generate(torch.tensor([prompt]), do_sample=False,
                                    max_new_tokens=new_tokens)[0, len(prompt):].tolist()
            print(f"prompt {prompt}: singularity {generated}, transformers {theirs}")
            check(generated == theirs, f"greedy from {prompt}: transformers' generate, token for token")

    # top-k 1 is greedy at any temperature; a seed repeats a sampled run, another seed differs.
    single = sample_generated(run("sample", "--checkpoint", run_dir, "--prompt", "1 2 3", "--tokens",
                                  str(new_tokens), "--temperature", "2", "--top-k", "1").stdout)
    check(single == ours[:1], "--top-k 1 at temperature 2 is greedy")
    sampled = ["sample", "--checkpoint", run_dir, "--prompt", "1 2 3", "--tokens", str(new_tokens),
               "--temperature", "1.5", "--top-p", "0.95", "--seed"]
    first, again = (sample_generated(run(*sampled, "7").stdout) for _ in range(2))
    check(first == again, "the same --seed samples the same tokens")
    check(first != sample_generated(run(*sampled, "8").stdout), "another --seed samples others")

    # Bad values: one error line that says what to give instead, exit 2, before any loading.
    for args, words in [(["--top-p", "1.5"], "--top-p 1.5 is outside (0, 1]"),
                        (["--top-p", "0"], "--top-p 0 is outside (0, 1]"),
                        (["--top-k", "-1"], "--top-k -1 is negative"),
                        (["--temperature", "-1"], "--temperature -1 is outside [0, 100]"),
                        (["--tokens", "0"], "--tokens 0 is outside [1, 100000]"),
                        (["--prompts", prompts_file], "either --prompt or --prompts"),
                        (["--prompt", "1 2 999"], "token id 999 is outside the vocabulary")]:
        base = ["sample", "--checkpoint", run_dir] + ([] if "--prompt" in args else ["--prompt", "1"])
        p = run(*base, *args, expect=2)
        lines = p.stderr.strip().splitlines()
        check(len(lines) == 1 and words in lines[0], f"{' '.join(args)}: {p.stderr.strip()}")


# --------------------------------------------------------------------------------------- ResNet

IMAGE, CLASSES, SEED, VAL_IMAGES = 32, 10, 11, 8
MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


class Rng:
    """util/rng.h: SplitMix64-seeded xoshiro256**."""

    def __init__(self, seed):
        self.s = []
        for _ in range(4):
            seed, word = splitmix64(seed)
            self.s.append(word)

    def next_u64(self):
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & MASK
        result = (rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def uniform(self):
        return (self.next_u64() >> 11) * 2.0 ** -53


def mix(a, b):
    return splitmix64((a ^ (b * 0x9E3779B97F4A7C15)) & MASK)[1]


def synthetic_images(seed, split_seed, count, n):
    """data/synthetic_images.cpp, images 0 .. n-1 of a split of `count` images: (n, 3, S, S)."""
    f32 = np.float32
    images = np.zeros((n, 3, IMAGE, IMAGE), np.float32)
    labels = []
    scale = f32(math.sqrt(3.0) / 65536.0)
    for b in range(n):
        image = b % count
        label = mix(split_seed, image) % CLASSES
        labels.append(label)
        prototype = Rng(mix(seed ^ 0x5CA1AB1E, label))
        colour, phase = [], []
        for _ in range(3):
            colour.append(f32(2 * prototype.uniform() - 1))
            phase.append(2 * math.pi * prototype.uniform())
        fx = (1 + 3 * prototype.uniform()) * 2.0 * math.pi / IMAGE
        fy = (1 + 3 * prototype.uniform()) * 2.0 * math.pi / IMAGE
        # glibc's double sin and cos (math.*, as std::), rounded to float32 tables
        sa = np.array([math.sin(fx * x) for x in range(IMAGE)], f32)
        ca = np.array([math.cos(fx * x) for x in range(IMAGE)], f32)
        rng = Rng(mix(split_seed, image + 0x1000000000))
        words = np.array([rng.next_u64() for _ in range(3 * IMAGE * IMAGE)], np.uint64)
        sums = sum(((words >> np.uint64(k)) & np.uint64(0xFFFF)).astype(np.int64) for k in (0, 16, 32, 48))
        noise = ((sums - 131070).astype(f32) * scale).reshape(3, IMAGE, IMAGE)
        for c in range(3):
            sb = np.array([math.sin(fy * y + phase[c]) for y in range(IMAGE)], f32)
            cb = np.array([math.cos(fy * y + phase[c]) for y in range(IMAGE)], f32)
            pattern = sa[None, :] * cb[:, None] + ca[None, :] * sb[:, None]
            images[b, c] = (colour[c] + pattern) + noise[c]
    return torch.from_numpy(images), torch.tensor(labels)


def resnet_job(work, name, init_from, steps=1):
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write(f"""name: {name}
seed: {SEED}
model:
  arch: resnet
  depth: 18
  width: 64
  classes: {CLASSES}
  image_size: {IMAGE}
  init_from: "{init_from}"
data:
  dataset: synthetic
  synthetic_images: {VAL_IMAGES * 10}
optim:
  name: sgd
  lr: 0.01
  min_lr: 0
  warmup_steps: 0
  decay: constant
train:
  steps: {steps}
  global_batch: 4
  micro_batch: 4
eval:
  every: 0
  steps: {VAL_IMAGES // 4}
checkpoint:
  every: 0
log:
  dir: {work}/runs/{name}
devices:
  threads: 2
""")
    return path


def case_resnet_torchvision(work):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=CLASSES)
    with torch.no_grad():  # batch norms away from their initial 1, 0, 0, 1
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    state_path = os.path.join(work, "resnet18.safetensors")
    safetensors.torch.save_file(model.state_dict(), state_path)

    job = resnet_job(work, "imported", state_path)
    run("train", job)
    ours = val_loss(os.path.join(work, "runs/imported"), 0)
    images, labels = synthetic_images(SEED, SEED ^ 0x76616C, VAL_IMAGES, VAL_IMAGES)
    model.eval()
    with torch.no_grad():
        theirs = float(F.cross_entropy(model(images).double(), labels))
    print(f"step-0 val loss: singularity {ours:.9f}, torchvision {theirs:.9f}, "
          f"relative difference {relative(ours, theirs):.2e}")
    check(relative(ours, theirs) < LOSS_RTOL, "init_from a torchvision state dict: same validation loss")

    back = os.path.join(work, "back.safetensors")
    run("export", job, back, "--format", "torchvision")
    diff = same_tensors(state_path, back)
    check(diff == "", "export of the imported state dict is torchvision's, bitwise " + diff)

    steps = 2
    trained = resnet_job(work, "trained", state_path, steps=steps)
    run("train", trained)
    out = os.path.join(work, "tv")
    run("export", os.path.join(work, "runs/trained"), out, "--format", "torchvision")
    state = safetensors.torch.load_file(os.path.join(out, "model.safetensors"))
    fresh = torchvision.models.resnet18(num_classes=CLASSES)
    fresh.load_state_dict(state, strict=True)
    check(int(state["bn1.num_batches_tracked"]) == steps, "num_batches_tracked holds the step")
    check(not torch.equal(state["conv1.weight"], model.state_dict()["conv1.weight"]),
          "the exported checkpoint is the trained one")
    fresh.eval()
    with torch.no_grad():
        trained_loss = float(F.cross_entropy(fresh(images).double(), labels))
    ours_trained = val_loss(os.path.join(work, "runs/trained"), steps)
    print(f"val loss after {steps} steps: singularity {ours_trained:.9f}, torchvision "
          f"{trained_loss:.9f}, relative difference {relative(ours_trained, trained_loss):.2e}")
    check(relative(ours_trained, trained_loss) < LOSS_RTOL, "exported checkpoint: same validation loss")

    p = run("export", os.path.join(work, "runs/trained"), os.path.join(work, "hf"), "--format", "hf",
            expect=2)
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1 and lines[0].startswith("error: --format hf exports GPT-2 and Llama"),
          "ResNet with --format hf refused: " + p.stderr.strip())


CASES = {"resnet_torchvision": case_resnet_torchvision}
for _arch in FAMILIES:
    CASES[_arch + "_import"] = lambda work, a=_arch: case_text_import(work, a)
    CASES[_arch + "_export"] = lambda work, a=_arch: case_text_export(work, a)
    CASES[_arch + "_generate"] = lambda work, a=_arch: case_text_generate(work, a)

if __name__ == "__main__":
    start = time.time()
    work = tempfile.mkdtemp(prefix="sg-interop-")
    try:
        CASES[CASE](work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{CASE}: {len(failures)} failed, {time.time() - start:.1f} s")
    sys.exit(1 if failures else 0)
