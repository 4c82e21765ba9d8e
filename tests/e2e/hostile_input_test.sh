#!/usr/bin/env bash
# Faults found by trying the CLI as a hostile user would (docs/faults.md), each a check that
# failed before its fix:
# - job-spec sizes past the documented limits are refused at once with exit 2 naming the key
#   (n_layer 100000 made `plan` run for minutes; 2^31-1 overflowed into negative parameters);
# - `export` refuses to write into the checkpoint or run directory it reads (it replaced the
#   checkpoint's own model.safetensors, and resume then fell back to an older one silently);
# - a failed write to metrics.jsonl or to the run's log on standard output stops the run at once
#   with one line (metrics stopped mid-line on a full disk and training went on without a word);
# - a machine without the CUDA libraries: `info` says CUDA is unavailable and why, in one line,
#   and succeeds.
set -uo pipefail
bin="$1"
source "$(dirname "$0")/run_lib.sh"

# Sizes.
for set in model.n_layer=100000 model.n_layer=2147483647 model.vocab=2147483647 \
           model.n_embd=1073741824 model.context=2147483647 data.synthetic_train_tokens=9223372036854775807 \
           data.synthetic_order=2147483647 train.micro_batch=2147483647; do
  key=${set%%=*}
  start=$SECONDS
  expect 2 "$key must be <=" -- timeout 20 "$bin" plan --set "$set"
  [[ $((SECONDS - start)) -le 5 ]] || fail "plan --set $set took $((SECONDS - start)) s to refuse"
done
check
out=$(timeout 60 "$bin" plan --set model.n_layer=1024 --set model.n_embd=65536 --set model.n_head=64 \
      --set model.vocab=65536 --set model.context=1048576 --set train.seq_len=1024 \
      --set data.synthetic_branching=4 2>&1)
rc=$?
# The largest sizes allowed plan in 64-bit arithmetic: positive counts, no overflow.
[[ $rc -eq 0 || $rc -eq 1 ]] || fail "plan at the size limits: exit $rc: $(tail -2 <<<"$out")"
! grep -Eq 'parameters: *-|: -[0-9]' <<<"$out" || fail "plan at the size limits printed a negative size: $(grep -E 'parameters' <<<"$out" | head -2)"

# Errors end their line (one ran into the next line's text).
check
"$bin" train --set optim.min_lr=1 --set optim.lr=0.5 > /dev/null 2> minlr.err
[[ "$(tail -c 1 minlr.err | od -An -c | tr -d ' ')" == '\n' ]] || fail "the error line does not end with a newline: $(cat minlr.err)"
# Deeply nested YAML: yaml-cpp's depth guard said "bad file".
expect 2 "nested too deeply" -- "$bin" plan --set "model.n_layer=$(printf '[%.0s' $(seq 3000))"
python3 -c "print('name: x\nmodel: ' + '{a: ' * 3000 + '1' + '}' * 3000)" > nested.yaml
expect 2 "nested.yaml:2:[0-9]+: YAML syntax error: nested too deeply" -- "$bin" plan nested.yaml

# Export into its own source.
cat > gpt.yaml <<'Y'
name: gpt
model: {n_layer: 1, n_head: 2, n_embd: 32, context: 16, vocab: 64}
data: {dataset: synthetic, synthetic_train_tokens: 4096, synthetic_val_tokens: 512}
train: {steps: 2, global_batch: 4, micro_batch: 4}
eval: {every: 0, steps: 1}
devices: {processes: 1, threads: 1}
checkpoint: {every: 1}
Y
check
"$bin" train gpt.yaml --set log.dir="$work/gpt" > gpt.log 2>&1 || fail "training the tiny GPT: $(tail -2 gpt.log)"
step=gpt/checkpoints/step_00000002
cp "$step/model.safetensors" saved.safetensors
expect 2 "inside .*step_00000002, which this export reads" -- "$bin" export "$step" "$step" --format hf
expect 2 "inside .*gpt, which this export reads" -- "$bin" export gpt gpt/hf --format hf
expect 2 "which this export reads" -- "$bin" export gpt "$work/gpt/checkpoints/../checkpoints/step_00000002/" --format hf
check
cmp -s saved.safetensors "$step/model.safetensors" || fail "export changed the checkpoint's model.safetensors"
expect 0 "exported" -- "$bin" export gpt exports/hf --format hf
expect 2 "which this export reads" -- "$bin" export gpt.yaml gpt.yaml --format hf
cat > rn.yaml <<'Y'
name: rn
model: {arch: resnet, depth: 10, width: 4, classes: 4, image_size: 32}
data: {dataset: synthetic, synthetic_images: 16}
optim: {name: sgd, lr: 0.1}
train: {steps: 1, global_batch: 4, micro_batch: 4}
eval: {every: 0, steps: 1}
devices: {processes: 1, threads: 1}
Y
check
"$bin" train rn.yaml --set log.dir="$work/rn" > rn.log 2>&1 || fail "training the tiny ResNet: $(tail -2 rn.log)"
rn_step=rn/checkpoints/step_00000001
cp "$rn_step/model.safetensors" rn_saved.safetensors
expect 2 "which this export reads" -- "$bin" export rn "$rn_step/model.safetensors" --format torchvision
check
cmp -s rn_saved.safetensors "$rn_step/model.safetensors" || fail "export --format torchvision replaced the checkpoint's weights"

# A full disk under the metrics and under the log.
check
mkdir -p full
ln -s /dev/full full/metrics.jsonl
out=$("$bin" train gpt.yaml --set log.dir="$work/full" 2>&1)
rc=$?
[[ $rc -eq 1 ]] || fail "metrics.jsonl on a full disk: exit $rc, want 1: $(tail -2 <<<"$out")"
grep -q 'metrics.jsonl: cannot write (No space left on device); the run stops here' <<<"$out" ||
  fail "no error line for metrics.jsonl on a full disk: $(tail -2 <<<"$out")"
check
err=$("$bin" train gpt.yaml --set log.dir="$work/fullout" 2>&1 > /dev/full)
rc=$?
[[ $rc -eq 1 ]] || fail "standard output on a full disk: exit $rc, want 1: $err"
grep -q 'standard output: cannot write' <<<"$err" || fail "no error line for a full standard output: $err"

# No CUDA libraries: the module cannot load (a library it needs is not one).
if "$bin" info 2>/dev/null | grep -q '^backends: cpu, cuda'; then
  mkdir -p nocuda
  echo "not a library" > nocuda/libcudnn.so.9
  check
  out=$(LD_LIBRARY_PATH="$work/nocuda" "$bin" info 2>&1)
  rc=$?
  [[ $rc -eq 0 ]] || fail "info without the CUDA libraries: exit $rc, want 0: $out"
  line=$(grep '^cuda: unavailable: ' <<<"$out")
  [[ -n "$line" ]] || fail "info without the CUDA libraries does not say CUDA is unavailable: $out"
  [[ "$line" != *'\n'* ]] || fail "info's CUDA line carries a literal \\n: $line"
  check
  out=$(LD_LIBRARY_PATH="$work/nocuda" "$bin" train gpt.yaml --set devices.backend=cuda --set log.dir="$work/cuda" 2>&1)
  rc=$?
  [[ $rc -ne 0 ]] || fail "a CUDA job without the CUDA libraries: exit 0"
  [[ $(grep -c 'error:' <<<"$out") -eq 1 && "$out" != *'\n'* ]] ||
    fail "a CUDA job without the CUDA libraries: not one error line: $out"
else
  echo "info without CUDA libraries: skipped (this build has no CUDA backend)"
fi
finish
