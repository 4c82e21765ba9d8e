#!/usr/bin/env bash
# Faults and stops on several processes, each a check:
# - SIGTERM to the self-launching parent: the ranks checkpoint at the step boundary (no step
#   lost), exit 3, no process is left; the resumed run ends bitwise equal to an uninterrupted
#   one (deterministic mode);
# - SIGKILL of one rank mid-run: the job ends non-zero within 30 s, no process left behind;
# - a truncated newest checkpoint: the resume falls back to the previous one and says so;
# - an injected non-finite gradient on 2 processes with ZeRO: skipped by every rank alike.
set -uo pipefail
bin="$1"
source "$(dirname "$0")/run_lib.sh"

cat > job.yaml <<'Y'
name: faults
seed: 11
model: {n_layer: 2, n_head: 2, n_embd: 64, context: 32, vocab: 96}
data: {dataset: synthetic, synthetic_train_tokens: 50000, synthetic_val_tokens: 2000}
optim: {lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 5}
train: {steps: 120, global_batch: 16, micro_batch: 4, deterministic: true}
eval: {every: 0, steps: 1}
parallel: {data: 2}
devices: {processes: 2, threads: 1}
checkpoint: {every: 1000, keep: 0, resume: auto}
log: {every: 1000}
Y
steps_logged() { local n; n=$(grep -c '"grad_norm"' "$1/metrics.jsonl" 2>/dev/null); echo "${n:-0}"; }
left_behind() { pgrep -f "log.dir=$work/$1" | grep -v "^$$\$" || true; }
# Waits (at most 60 s) until run directory $1 has logged at least $2 steps.
wait_steps() {
  for _ in $(seq 600); do
    [[ $(steps_logged "$1") -ge $2 ]] && return 0
    sleep 0.1
  done
  return 1
}

check
"$bin" train job.yaml --set log.dir="$work/whole" > whole.log 2>&1 || fail "uninterrupted run: $(tail -2 whole.log)"
"$bin" train job.yaml --set log.dir="$work/stopped" > stopped.log 2>&1 &
parent=$!
wait_steps stopped 10 || fail "the run to interrupt did not reach step 10"
kill -TERM "$parent"
wait "$parent"
code=$?
logged=$(steps_logged stopped)
[[ $code -eq 3 ]] || fail "SIGTERM to the parent: exit $code, expected 3: $(tail -3 stopped.log)"
saved=$(ls stopped/checkpoints 2>/dev/null | sed -n 's/^step_0*\([0-9]*\)$/\1/p' | tail -1)
echo "stopped on SIGTERM after step $logged; checkpoint at step ${saved:-none}; steps lost: $(( logged - ${saved:-0} ))"
[[ -n "$saved" && "$saved" -eq "$logged" ]] || fail "the checkpoint (${saved:-none}) is not at the last step logged ($logged)"
grep -q "stopped at step $logged of 120 on SIGUSR1" stopped.log || fail "no stop line: $(tail -3 stopped.log)"
sleep 1
[[ -z "$(left_behind stopped)" ]] || fail "processes left behind: $(left_behind stopped)"
"$bin" train job.yaml --set log.dir="$work/stopped" > resumed.log 2>&1 || fail "resume: $(tail -2 resumed.log)"
grep -q "resumed from .*step_0*$saved at step $saved" resumed.log || fail "did not resume at $saved: $(head -2 resumed.log)"
[[ "$(math_lines whole)" == "$(math_lines stopped)" ]] || fail "interrupted + resumed losses differ from the uninterrupted run"
cmp -s whole/checkpoints/step_00000120/model.safetensors stopped/checkpoints/step_00000120/model.safetensors &&
  cmp -s whole/checkpoints/step_00000120/optimizer.safetensors stopped/checkpoints/step_00000120/optimizer.safetensors ||
  fail "interrupted + resumed weights differ from the uninterrupted run"

check
start=$SECONDS
"$bin" train job.yaml --set log.dir="$work/killed" > killed.log 2>&1 &
parent=$!
wait_steps killed 5 || fail "the run to kill did not reach step 5"
rank=$(pgrep -f "log.dir=$work/killed" | while read -r p; do
  [[ $p -ne $parent && "$(ps -o comm= -p "$p")" == singularity ]] && echo "$p"; done | tail -1)
[[ -n "$rank" ]] && kill -KILL "$rank"
( sleep 30; touch hung; kill -KILL "$parent" 2>/dev/null ) &
watchdog=$!
wait "$parent"
code=$?
kill "$watchdog" 2>/dev/null
echo "SIGKILL of rank pid $rank: the job ended with exit $code after $(( SECONDS - start )) s: $(tail -1 killed.log)"
[[ ! -e hung ]] || fail "SIGKILL of one rank: the job hung (killed after 30 s)"
[[ $code -ne 0 ]] || fail "SIGKILL of one rank: exit 0"
grep -q "error: a process of the job was killed by" killed.log || fail "no error line for the killed rank: $(tail -2 killed.log)"
sleep 1
[[ -z "$(left_behind killed)" ]] || fail "processes left behind after a rank died: $(left_behind killed)"

check
"$bin" train job.yaml --set log.dir="$work/trunc" --set train.steps=20 --set checkpoint.every=10 > t1.log 2>&1 || fail "run: $(tail -2 t1.log)"
truncate -s 100 trunc/checkpoints/step_00000020/model.safetensors
"$bin" train job.yaml --set log.dir="$work/trunc" --set train.steps=30 --set checkpoint.every=10 > t2.log 2>&1 || fail "fallback resume: $(tail -2 t2.log)"
grep -q "step_00000020.*skipp\|skipp.*step_00000020" t2.log || fail "the truncated checkpoint was not reported: $(head -3 t2.log)"
grep -q "resumed from .*step_00000010 at step 10" t2.log || fail "did not fall back to step 10: $(head -3 t2.log)"

check
SINGULARITY_TEST_NONFINITE=4 "$bin" train job.yaml --set log.dir="$work/nan" --set train.steps=8 \
  --set parallel.zero=1 --set train.deterministic=false --set checkpoint.every=4 > nan.log 2>&1 || fail "non-finite step: $(tail -2 nan.log)"
grep -q '"step": 4, "loss": [^,]*, "lr": [^,]*, "grad_norm": null.*"skipped": true, "skipped_steps": 1' nan/metrics.jsonl ||
  fail "step 4 not recorded as skipped: $(grep '"step": 4' nan/metrics.jsonl)"
grep -q "step 4: loss or gradients not finite" nan.log || fail "no skip line in the log"
cmp -s nan/checkpoints/step_00000008/model.safetensors /dev/null && fail "no final checkpoint"
finish
