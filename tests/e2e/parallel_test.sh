#!/usr/bin/env bash
# Multi-process training under mpirun (oversubscribed on a 2-core machine):
# - the self-launch runs devices.processes ranks and returns the job's exit code;
# - data parallelism over 2 processes gives the losses of the same virtual mesh on 1 process;
# - a rank that fails mid-step ends the whole job non-zero within 30 s, naming the rank;
# - a world size that does not match the job is refused.
set -uo pipefail
bin="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
mpirun_flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && mpirun_flags+=(--allow-run-as-root)

cat > tiny.yaml <<'Y'
name: tiny
seed: 7
model: {n_layer: 2, n_head: 2, n_embd: 32, context: 16, vocab: 64}
data: {dataset: synthetic, synthetic_train_tokens: 20000, synthetic_val_tokens: 2000}
optim: {lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 2}
train: {steps: 10, global_batch: 8, micro_batch: 2}
eval: {every: 5, steps: 2}
parallel: {data: 4}
devices: {threads: 1}
checkpoint: {every: 5, resume: never}
Y

losses() { grep '"grad_norm"' "$1/metrics.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }

"$bin" train tiny.yaml --set log.dir=one --set devices.processes=1 > one.log 2>&1 || fail "1 process run: $(tail -2 one.log)"
"$bin" train tiny.yaml --set log.dir=two --set devices.processes=2 > two.log 2>&1 || fail "2 process self-launch: $(tail -2 two.log)"
"$bin" train tiny.yaml --set log.dir=four --set devices.processes=4 > four.log 2>&1 || fail "4 process self-launch: $(tail -2 four.log)"
"$bin" train tiny.yaml --set log.dir=zero1 --set devices.processes=2 --set parallel.zero=1 > zero1.log 2>&1 || fail "zero 1: $(tail -2 zero1.log)"
"$bin" train tiny.yaml --set log.dir=zero2 --set devices.processes=4 --set parallel.zero=2 > zero2.log 2>&1 || fail "zero 2: $(tail -2 zero2.log)"
# ZeRO resumes too: the sharded moments are gathered into the checkpoint and re-sharded on load.
"$bin" train tiny.yaml --set log.dir=zero2r --set devices.processes=4 --set parallel.zero=2 --stop-after 5 > zero2r.log 2>&1 || fail "zero 2 stop: $(tail -2 zero2r.log)"
"$bin" train tiny.yaml --set log.dir=zero2r --set devices.processes=2 --set parallel.zero=1 --set checkpoint.resume=auto > zero2r2.log 2>&1 || fail "zero resume: $(tail -2 zero2r2.log)"
grep -q "resumed from .*step_00000005 at step 5" zero2r2.log || fail "the ZeRO run did not resume from step 5: $(head -3 zero2r2.log)"
for run in two four zero1 zero2 zero2r; do
  if [[ $(losses one | wc -l) -ne 10 || $(losses $run | wc -l) -ne 10 ]]; then
    fail "expected 10 step lines in one/ and $run/"
    continue
  fi
  worst=$(paste <(losses one) <(losses $run) | awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r } END { printf "%.3g", m }')
  echo "data=4 on 1 vs $run processes: worst relative loss difference $worst"
  awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }' || fail "losses differ by $worst (> 1e-5) between 1 and $run processes"
done
grep -q "on 2 process" two.log || fail "the 2-process run did not report 2 processes"

# Deterministic mode: the same virtual mesh on 1, 2 and 4 processes (and with ZeRO-2) gives
# bitwise identical losses, weights and optimizer state.
math_lines() { grep '"grad_norm"' "$1/metrics.jsonl" | sed 's/, "step_ms".*//'; }
for layout in "1 0" "2 0" "4 0" "4 2"; do
  set -- $layout
  "$bin" train tiny.yaml --set log.dir=det-$1-$2 --set devices.processes=$1 --set parallel.zero=$2 \
    --set train.deterministic=true > det-$1-$2.log 2>&1 || fail "deterministic $1 processes, zero $2: $(tail -2 det-$1-$2.log)"
done
for run in det-2-0 det-4-0 det-4-2; do
  if [[ $(math_lines det-1-0 | wc -l) -eq 10 ]] && diff <(math_lines det-1-0) <(math_lines $run) > /dev/null &&
     cmp -s det-1-0/checkpoints/step_00000010/model.safetensors $run/checkpoints/step_00000010/model.safetensors &&
     cmp -s det-1-0/checkpoints/step_00000010/optimizer.safetensors $run/checkpoints/step_00000010/optimizer.safetensors; then
    echo "deterministic: $run is bitwise identical to 1 process"
  else
    fail "deterministic: $run differs from the 1-process run"
  fi
done

# A failure on rank 1 at step 3 must end the job, non-zero, within 30 s.
start=$(date +%s)
SINGULARITY_TEST_FAIL=1:3 timeout 60 "$bin" train tiny.yaml --set log.dir=boom --set devices.processes=2 > boom.log 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "injected failure: exit $rc after ${elapsed}s"
[[ $rc -ne 0 && $rc -ne 124 ]] || fail "injected failure exited $rc (want non-zero, no timeout)"
(( elapsed <= 30 )) || fail "injected failure took ${elapsed}s (> 30 s)"
grep -q "rank 1: error: injected failure at step 3" boom.log || fail "no rank-tagged error line: $(tail -3 boom.log)"
# The same on rank 0, which also writes the run directory.
start=$(date +%s)
SINGULARITY_TEST_FAIL=0:3 timeout 60 "$bin" train tiny.yaml --set log.dir=boom0 --set devices.processes=2 > boom0.log 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
[[ $rc -ne 0 && $rc -ne 124 && $elapsed -le 30 ]] || fail "rank-0 failure: exit $rc after ${elapsed}s"
grep -q "rank 0: error: injected failure at step 3" boom0.log || fail "no rank-0 error line: $(tail -3 boom0.log)"

# Under mpirun with the wrong number of processes: refused with a clear message, exit 2.
mpirun "${mpirun_flags[@]}" -np 2 "$bin" train tiny.yaml --set log.dir=wrong --set devices.processes=4 > wrong.log 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "world-size mismatch exited $rc (want 2)"
grep -q "devices.processes 4 but runs on 2" wrong.log || fail "mismatch message: $(head -2 wrong.log)"

echo "$(( 17 - failures )) passed, $failures failed"
[[ $failures -eq 0 ]]
