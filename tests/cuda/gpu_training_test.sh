#!/usr/bin/env bash
# Training on a GPU against the CPU backend (suite cuda; exits 77 where no GPU is visible):
#   1. the first steps of a small GPT-2 and a small ResNet: losses and gradient norms within
#      1e-4 (relative) of the CPU's, fp32 on both;
#   2. a tensor x pipeline GPT-2 on 2 processes sharing the GPU (devices.share_gpus): close to the
#      1-process GPU run;
#   3. bitwise resume on the GPU: 6 steps in one go == 3 steps, stop, resume for 3;
#   4. deterministic mode on the GPU: 1 process == 2 processes sharing the GPU, bitwise.
set -uo pipefail
bin="$1"
py="${SINGULARITY_PYTHON:-/usr/bin/python3}"  # the GPU kit sets the machine's python3
if ! "$bin" info 2>/dev/null | grep -q '^cuda device [0-9]'; then
  echo "skipped: no CUDA device visible"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/gpt.yaml" <<'YAML'
name: gpu-gpt
seed: 7
model: {arch: gpt2, n_layer: 2, n_head: 4, n_embd: 128, context: 64, vocab: 512}
data: {dataset: synthetic, synthetic_train_tokens: 100000, synthetic_val_tokens: 10000}
optim: {lr: 3.0e-3, warmup_steps: 2, weight_decay: 0.1, grad_clip: 1.0}
train: {steps: 3, global_batch: 8, micro_batch: 4}
eval: {every: 0, steps: 1}
devices: {backend: cuda, processes: 1}
checkpoint: {every: 3}
YAML
cat > "$dir/resnet.yaml" <<'YAML'
name: gpu-resnet
seed: 7
model: {arch: resnet, depth: 18, width: 16, classes: 10, image_size: 64}
data: {dataset: synthetic, synthetic_images: 256}
optim: {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 1.0e-4, grad_clip: 1.0}
train: {steps: 3, global_batch: 16, micro_batch: 8}
eval: {every: 0, steps: 1}
devices: {backend: cuda, processes: 1}
checkpoint: {every: 3}
YAML
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# train OUT JOB [--set ...]
train() { local out="$1" job="$2"; shift 2; "$bin" train "$dir/$job.yaml" --set log.dir="$out" "$@" > "$out.log" 2>&1 || { echo "--- $out.log"; grep -v '^step ' "$out.log" | tail -40; return 1; }; }
# metrics.jsonl step lines as "loss grad_norm", one per step
steps() { "$py" -c '
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "loss" in d: print(d["loss"], d["grad_norm"])' "$1/metrics.jsonl"; }
close() { "$py" -c '
import sys
a = [list(map(float, l.split())) for l in open(sys.argv[1])]
b = [list(map(float, l.split())) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
bad = len(a) != len(b) or len(a) == 0 or any(abs(x - y) > tol * max(abs(x), 1e-3) for r, s in zip(a, b) for x, y in zip(r, s))
sys.exit(1 if bad else 0)' "$1" "$2" "$3"; }

# 1. GPU against CPU, fp32.
for model in gpt resnet; do
  train "$dir/$model-cpu" $model --set devices.backend=cpu || fail "$model on the CPU"
  train "$dir/$model-gpu" $model || fail "$model on the GPU"
  steps "$dir/$model-cpu" > "$dir/$model-cpu.txt"; steps "$dir/$model-gpu" > "$dir/$model-gpu.txt"
  close "$dir/$model-cpu.txt" "$dir/$model-gpu.txt" 1e-4 || { fail "$model: GPU losses differ from the CPU's"; paste "$dir/$model-cpu.txt" "$dir/$model-gpu.txt"; }
done

# 2. tensor x pipeline on 2 processes sharing the GPU.
shared=(--set devices.processes=2 --set devices.share_gpus=true)
train "$dir/tp" gpt "${shared[@]}" --set parallel.tensor=2 || fail "tensor 2 sharing the GPU"
train "$dir/pp" gpt "${shared[@]}" --set parallel.pipeline=2 || fail "pipeline 2 sharing the GPU"
for split in tp pp; do
  steps "$dir/$split" > "$dir/$split.txt"
  close "$dir/gpt-gpu.txt" "$dir/$split.txt" 1e-4 || fail "$split on a shared GPU differs from 1 process"
done
grep -q "share_gpus" "$dir/tp.log" || fail "the shared-GPU run does not say so in its log"

# 3. bitwise resume on the GPU.
train "$dir/whole" gpt --set train.steps=6 || fail "6 steps"
train "$dir/part" gpt --set train.steps=6 --stop-after 3 || fail "3 steps"
train "$dir/part" gpt --set train.steps=6 || fail "resume"
steps "$dir/whole" > "$dir/whole.txt"; steps "$dir/part" > "$dir/part.txt"
cmp -s "$dir/whole.txt" "$dir/part.txt" || fail "resume on the GPU is not bitwise"
cmp -s "$dir/whole/checkpoints/step_00000006/model.safetensors" \
       "$dir/part/checkpoints/step_00000006/model.safetensors" || fail "resumed weights differ"

# 4. deterministic: 1 process == 2 processes sharing the GPU.
det=(--set train.deterministic=true --set parallel.data=2)
train "$dir/det1" gpt "${det[@]}" || fail "deterministic, 1 process"
train "$dir/det2" gpt "${det[@]}" "${shared[@]}" || fail "deterministic, 2 processes"
steps "$dir/det1" > "$dir/det1.txt"; steps "$dir/det2" > "$dir/det2.txt"
cmp -s "$dir/det1.txt" "$dir/det2.txt" || fail "deterministic GPU runs differ between 1 and 2 processes"

echo "$failures failure(s)"
[[ $failures -eq 0 ]]
