#!/usr/bin/env bash
# `singularity sweep SWEEP.yaml --slurm` on a real single-node Slurm: a 3-point sweep of a tiny
# version of the quickstart job is written as <dir>/sweep.sbatch (an array job, --array=0-2%2) and submitted
# with the sbatch on PATH; every array task completes with exit 0:0, at most 2 run at once, each
# point's log and run directory are there, and `sweep --summary` counts 3 done.
set -uo pipefail
source "$(dirname "$0")/slurm_lib.sh"

cat > sweep.yaml <<'Y'
name: slurm-sweep
grid: {optim.lr: [1e-3, 3e-3, 1e-2]}
set: {model.n_embd: 32, model.n_head: 2, model.context: 16, model.vocab: 64,
      train.steps: 20, train.global_batch: 8, train.micro_batch: 2, parallel.data: 1,
      eval.every: 10, eval.steps: 2, checkpoint.every: 10, log.every: 10,
      devices.processes: 1, devices.threads: 1,
      data.synthetic_train_tokens: 20000, data.synthetic_val_tokens: 2000}
Y

submitted=$(date +%s.%N)
timeout 60 "$bin" sweep sweep.yaml --slurm --max-parallel 2 > submit.log 2>&1
rc=$?
cat submit.log
check
[[ $rc -eq 0 ]] || { fail "sweep --slurm exited $rc"; exit 1; }
job=$(sed -n 's/.*submitted array job \([0-9]*\).*/\1/p' submit.log | head -n 1)
check
[[ -n $job ]] || { fail "sweep --slurm did not say 'submitted array job N'"; exit 1; }
check
grep -qx -- '#SBATCH --array=0-2%2' runs/slurm-sweep/sweep.sbatch ||
  fail "runs/slurm-sweep/sweep.sbatch lacks '#SBATCH --array=0-2%2'"

# Until no task of the array is pending or running (at most 180 s), counting those running.
most=0
for ((i = 0; i < 360; i++)); do
  queued=$(timeout 10 squeue -h -r -j "$job" -o '%i %T' 2> /dev/null)
  [[ -z $queued ]] && break
  running=$(grep -c ' RUNNING$' <<< "$queued")
  (( running > most )) && most=$running
  sleep 0.5
done
elapsed=$(awk -v s="$submitted" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
echo "array job $job: ${elapsed} s from sweep --slurm to the last task's end; at most $most tasks ran at once"
check
[[ -z $queued ]] || fail "tasks still queued after 180 s: $queued"
check
(( most >= 1 && most <= 2 )) || fail "$most tasks ran at once (want 1 or 2: --array=0-2%2)"

# Each task's record: "ArrayTaskId=K ... JobState=S ... ExitCode=E".
records=$(timeout 10 scontrol -o show job "$job" 2> /dev/null)
for k in 0 1 2; do
  record=$(grep " ArrayTaskId=$k " <<< "$records")
  state=$(grep -o 'JobState=[A-Z_]*' <<< "$record" | cut -d= -f2)
  code=$(grep -o ' ExitCode=[0-9:]*' <<< "$record" | cut -d= -f2)
  out=runs/slurm-sweep/logs/${job}_$k.out
  echo "task $k: ${state:-unknown}, exit ${code:-?}; $out:"
  sed 's/^/  /' "$out" 2> /dev/null | grep -v '^  step '
  check
  [[ $state == COMPLETED && $code == 0:0 ]] || fail "task $k ended ${state:-unknown}, exit ${code:-?} (want COMPLETED, 0:0)"
  check
  grep -q "point $k.*done" "$out" 2> /dev/null || fail "$out does not say point $k is done"
done
check
for d in runs/slurm-sweep/[0-2]-*; do
  [[ $(grep -c '"grad_norm"' "$d/metrics.jsonl" 2> /dev/null) -eq 20 ]] ||
    fail "$d/metrics.jsonl: expected 20 step lines"
done
[[ $(ls -d runs/slurm-sweep/[0-2]-* 2> /dev/null | wc -l) -eq 3 ]] ||
  fail "expected 3 point run directories: $(ls runs/slurm-sweep)"
"$bin" sweep sweep.yaml --summary > summary.log 2>&1
check
grep -q '3 points: 3 done, 0 failed, 0 running, 0 pending' summary.log ||
  fail "sweep --summary: $(tail -n 3 summary.log)"

finish
