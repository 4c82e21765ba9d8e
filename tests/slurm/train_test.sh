#!/usr/bin/env bash
# The sbatch template (scripts/slurm/train.sbatch) on a real single-node Slurm: a tiny 2-process
# job submitted with sbatch runs as one `srun --mpi=pmix` step of 2 tasks, completes with exit
# 0:0, and leaves its log (both ranks in one world of 2 processes) and its run directory
# (metrics for every step, the checkpoints, the resolved job with resume: auto).
set -uo pipefail
source "$(dirname "$0")/slurm_lib.sh"

cat > tiny.yaml <<'Y'
name: slurm-tiny
seed: 7
model: {n_layer: 2, n_head: 2, n_embd: 32, context: 16, vocab: 64}
data: {dataset: synthetic, synthetic_train_tokens: 20000, synthetic_val_tokens: 2000}
optim: {lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 2}
train: {steps: 20, global_batch: 8, micro_batch: 2}
eval: {every: 10, steps: 2}
parallel: {data: 2}
devices: {threads: 1, processes: 2}
checkpoint: {every: 10, resume: never}
log: {dir: run, every: 5}
Y
mkdir logs   # the template's --output=logs/%x-%j.out: Slurm does not create the folder

submitted=$(date +%s.%N)
job=$(SINGULARITY="$bin" timeout 30 sbatch --parsable --job-name=tiny "$template" tiny.yaml)
check
[[ $job =~ ^[0-9]+$ ]] || { fail "sbatch did not print a job id: $job"; exit 1; }
wait_job "$job" 120
elapsed=$(awk -v s="$submitted" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
echo "job $job: $state, exit $(job_exit "$job"), ${elapsed} s from sbatch to the end"
log=logs/tiny-$job.out
echo "--- $log (steps left out)"
grep -v '^step ' "$log" 2> /dev/null | sed 's/^/  /'

check
[[ $state == COMPLETED && $(job_exit "$job") == 0:0 ]] ||
  fail "job $job ended $state, exit $(job_exit "$job") (want COMPLETED, 0:0)"
check
grep -q "on 2 process(es)" "$log" || fail "the log does not say 2 processes: $(grep -m1 'process' "$log")"
check
[[ $(grep -c '^slurm-tiny: ' "$log") -eq 1 ]] ||
  fail "expected one job header line (one world of 2 ranks, not 2 single-process runs)"
check
grep -q "job $job run 1: 2 tasks on " "$log" || fail "the template's first line is missing"
check
grep -q '^done: 20 steps' "$log" || fail "the training did not end at step 20: $(tail -n 2 "$log")"
check
grep -q 'training exited with code 0' "$log" || fail "the template did not report exit code 0"
check
steps=$(grep -c '"grad_norm"' run/metrics.jsonl 2> /dev/null)
[[ $steps -eq 20 ]] || fail "run/metrics.jsonl: expected 20 step lines, got ${steps:-none}"
check
[[ $(grep -c '"val_loss"' run/metrics.jsonl 2> /dev/null) -eq 3 ]] ||
  fail "run/metrics.jsonl: expected 3 evaluations (steps 0, 10, 20)"
check
[[ -f run/checkpoints/step_00000010/manifest.json && -f run/checkpoints/step_00000020/manifest.json ]] ||
  fail "expected checkpoints at steps 10 and 20: $(ls run/checkpoints 2>&1)"
# The template passes --set checkpoint.resume=auto and devices.processes=$SLURM_NTASKS.
check
grep -Eq 'resume: "?auto' run/job.yaml && grep -q 'processes: 2' run/job.yaml ||
  fail "run/job.yaml: expected resume: auto and processes: 2 from the template's --set"

# `singularity train` in a batch script, outside any job step, launches its own ranks as one
# srun step (as it would with mpirun on a workstation).
cat > self.sbatch <<S
#!/usr/bin/env bash
#SBATCH --ntasks=2
#SBATCH --output=logs/self-%j.out
"$bin" train tiny.yaml --set log.dir=self
S
job=$(timeout 30 sbatch --parsable self.sbatch)
wait_job "$job" 120
check
[[ $state == COMPLETED && $(job_exit "$job") == 0:0 ]] ||
  fail "self-launch in a batch script: job $job ended $state, exit $(job_exit "$job"): $(tail -n 3 logs/self-$job.out)"
check
grep -q "on 2 process(es)" logs/self-$job.out && [[ $(grep -c '"grad_norm"' self/metrics.jsonl 2> /dev/null) -eq 20 ]] ||
  fail "self-launch in a batch script: not one 2-process run of 20 steps: $(head -n 2 logs/self-$job.out)"

# srun without PMI: each task would see a world of its own and train alone; refused, once.
check
timeout 60 srun --mpi=none -n 2 "$bin" train tiny.yaml --set log.dir=nopmi > nopmi.log 2>&1
code=$?
[[ $code -eq 2 ]] || fail "srun --mpi=none: exit $code, expected 2: $(tail -n 2 nopmi.log)"
[[ $(grep -c 'srun --mpi=pmix' nopmi.log) -eq 1 ]] || fail "srun --mpi=none: expected one line saying to use --mpi=pmix: $(cat nopmi.log)"

finish
