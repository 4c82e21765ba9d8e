#!/usr/bin/env bash
# Preemption through the sbatch template on a real single-node Slurm: a 2-process job of 300
# tiny steps (checkpoint.every far beyond them, so only the signal makes a checkpoint) gets
# `scancel --signal=USR1 --batch` once it is past step 30. Expected, in order: the batch script
# passes USR1 to the step, the training checkpoints at the step boundary after the signal and
# exits 3, the script requeues the job, Slurm reruns it (after the cluster's requeue delay,
# AuthInfo cred_expire) with SLURM_RESTART_COUNT=1, the rerun resumes from that checkpoint and
# ends at step 300. Reports the steps lost (computed but not in the checkpoint; want 0) and
# the requeue delay.
set -uo pipefail
source "$(dirname "$0")/slurm_lib.sh"

steps=300
cat > long.yaml <<Y
name: slurm-long
seed: 7
model: {n_layer: 2, n_head: 2, n_embd: 32, context: 16, vocab: 64}
data: {dataset: synthetic, synthetic_train_tokens: 20000, synthetic_val_tokens: 2000}
optim: {lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 2}
train: {steps: $steps, global_batch: 8, micro_batch: 2}
eval: {every: 0, steps: 2}
parallel: {data: 2}
devices: {threads: 1, processes: 2}
checkpoint: {every: 1000000, resume: never}
log: {dir: run, every: 1}
Y
mkdir logs
# The last step in run/metrics.jsonl.
last_step() { grep '"grad_norm"' run/metrics.jsonl 2> /dev/null | tail -n 1 | sed 's/.*"step": \([0-9]*\).*/\1/'; }

job=$(SINGULARITY="$bin" timeout 30 sbatch --parsable --job-name=long "$template" long.yaml)
check
[[ $job =~ ^[0-9]+$ ]] || { fail "sbatch did not print a job id: $job"; exit 1; }
log=logs/long-$job.out

# Signal once the training is past step 30 (at most 60 s).
before=
for ((i = 0; i < 600; i++)); do
  before=$(last_step)
  (( ${before:-0} >= 30 )) && break
  ended "$(job_state "$job")" && break
  sleep 0.1
done
check
if (( ${before:-0} < 30 )) || (( before >= steps )); then
  fail "the job did not get past step 30 while running (state $(job_state "$job"), last step ${before:-none})"
  cat "$log" 2> /dev/null | tail -n 5
  finish
  exit
fi
timeout 10 scancel --signal=USR1 --batch "$job"
echo "sent USR1 to the batch script of job $job; the last step logged before it: $before"
wait_job "$job" 180
echo "job $job: $state, exit $(job_exit "$job"), $(timeout 10 scontrol show job "$job" | grep -o 'Restarts=[0-9]*')"
echo "--- $log (step lines left out)"
grep -v '^step ' "$log" 2> /dev/null | sed 's/^/  /'

check
[[ $state == COMPLETED && $(job_exit "$job") == 0:0 ]] ||
  fail "job $job ended $state, exit $(job_exit "$job") (want COMPLETED, 0:0)"
check
timeout 10 scontrol show job "$job" | grep -q 'Restarts=1 ' || fail "the job was not restarted exactly once"
check
grep -q 'got SIGUSR1' "$log" || fail "the batch script did not get SIGUSR1"

# Run 1: the checkpoint the signal made, the exit code 3, the requeue.
run1=$(sed -n '/ run 1: /,/ run 2: /p' "$log")
ckpt=$(sed -n 's/^stopped at step \([0-9]*\) of .* on SIGUSR1.*/\1/p' <<< "$run1" | head -n 1)
check
if [[ -z $ckpt ]]; then
  fail "the training did not report 'stopped at step N of $steps on SIGUSR1': $(grep -v '^step ' <<< "$run1" | tail -n 4)"
  ckpt=0
fi
check
grep -q "saved checkpoint run/checkpoints/step_$(printf '%08d' "$ckpt")" <<< "$run1" &&
  [[ -f run/checkpoints/step_$(printf '%08d' "$ckpt")/manifest.json ]] ||
  fail "no checkpoint at step $ckpt: $(ls run/checkpoints 2>&1)"
check
grep -q 'tasks\? [0-9-]*: Exited with exit code 3' <<< "$run1" || fail "the step did not exit with code 3"
check
grep -q 'training checkpointed and stopped (exit 3): requeueing' <<< "$run1" ||
  fail "the template did not requeue after exit 3"
last_run1=$(grep '^step ' <<< "$run1" | tail -n 1 | sed 's/^step *\([0-9]*\)\/.*/\1/')
lost=$(( ${last_run1:-0} - ckpt ))
echo "signal after step $before; checkpoint at step $ckpt ($(( ckpt - before )) steps later);" \
     "last step of run 1: ${last_run1:-none}; steps lost: $lost"
check
(( ckpt >= before )) || fail "the checkpoint (step $ckpt) is older than the signal (after step $before)"
check
(( lost == 0 )) || fail "$lost steps were computed after the checkpoint and lost"

# The requeue delay: from the requeue (the template's timestamp) to the rerun's first line.
requeued=$(sed -n 's/^\([0-9-]* [0-9:]*\) training checkpointed and stopped (exit 3): requeueing.*/\1/p' "$log" | head -n 1)
rerun=$(sed -n 's/^\([0-9-]* [0-9:]*\) job [0-9]* run 2: .*/\1/p' "$log" | head -n 1)
if [[ -n $requeued && -n $rerun ]]; then
  echo "requeue delay: $(( $(date -d "$rerun" +%s) - $(date -d "$requeued" +%s) )) s (requeue at $requeued, rerun at $rerun)"
fi

# Run 2: resumed from that checkpoint, finished at train.steps.
run2=$(sed -n '/ run 2: /,$p' "$log")
check
grep -q "resumed from .*step_$(printf '%08d' "$ckpt") at step $ckpt" <<< "$run2" ||
  fail "the rerun did not resume from step $ckpt: $(grep -v '^step ' <<< "$run2" | head -n 4)"
check
grep -q "^step *$steps/$steps " <<< "$run2" && grep -q "^done: " <<< "$run2" ||
  fail "the rerun did not finish at step $steps: $(tail -n 3 "$log")"
check
grep -q 'training exited with code 0' <<< "$run2" || fail "the rerun did not exit 0"
# Every step once in metrics.jsonl, or the lost steps again.
check
distinct=$(grep '"grad_norm"' run/metrics.jsonl | sed 's/.*"step": \([0-9]*\).*/\1/' | sort -un | wc -l)
total=$(grep -c '"grad_norm"' run/metrics.jsonl)
echo "run/metrics.jsonl: $total step lines, $distinct distinct steps"
[[ $distinct -eq $steps && $(last_step) -eq $steps ]] ||
  fail "run/metrics.jsonl: expected steps 1..$steps, got $distinct distinct, last $(last_step)"

finish
