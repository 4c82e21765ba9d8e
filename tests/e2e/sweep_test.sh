#!/usr/bin/env bash
# `singularity sweep`: a 3-point sweep of a tiny quickstart job (one point on 2 processes
# through the self-launch) writes three run directories and a summary that matches their
# metrics.jsonl; a re-run skips them; --index runs one point; --dry-run lists; --summary reads
# them back; --slurm writes (and with sbatch on PATH submits) an array script whose task runs a
# point and requeues it when Slurm's USR1 stops it; a point that fails at run time is marked
# failed while the others finish; bad sweep files give one error line, exit 2 and run nothing.
set -uo pipefail
bin="$1"
man_page="${2:-}/man/singularity.1"
source "$(dirname "$0")/run_lib.sh"

# The value of field $2 in the last line of $1 (a metrics.jsonl) that has it.
last_value() { grep "\"$2\": " "$1" | tail -1 | sed "s/.*\"$2\": \([^,}]*\).*/\1/"; }
# Column $2 (by header name) of row index $3 of the CSV $1 (fields without commas or quotes).
csv_value() {
  awk -F, -v name="$2" -v index_="$3" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
    $1 == index_ { print $c }' "$1"
}

tiny='{train.steps: 20, eval.every: 10, eval.steps: 2, checkpoint.every: 10, log.every: 10,
       devices.processes: 1, model.n_layer: 1, model.n_head: 2, model.n_embd: 32, model.context: 32,
       train.global_batch: 8, train.micro_batch: 4, data.synthetic_train_tokens: 16384,
       data.synthetic_val_tokens: 4096}'
cat > main.yaml <<Y
# The embedded quickstart job, tiny.
name: main
grid: {optim.lr: [1e-3, 3e-3]}
points: [{optim.lr: 2e-3, devices.processes: 2}]
set: $tiny
Y

# --- the sweep runs its three points one after another ---
start=$(date +%s)
"$bin" sweep main.yaml > main.log 2>&1
rc=$?
echo "3-point sweep: $(( $(date +%s) - start )) s"
check
[[ $rc -eq 0 ]] || fail "sweep main.yaml exited $rc: $(tail -5 main.log)"
check
dirs=(runs/main/0-lr=1e-3 runs/main/1-lr=3e-3 runs/main/2-lr=2e-3_processes=2)
for d in "${dirs[@]}"; do
  [[ -f $d/metrics.jsonl && -f $d/checkpoints/step_00000020/manifest.json && -f $d/train.log ]] ||
    fail "$d: expected metrics.jsonl, train.log and a checkpoint at step 20: $(ls "$d" 2>&1)"
done
check
[[ $(ls runs/main | grep -c -- '-') -eq 3 ]] || fail "expected 3 run directories: $(ls runs/main)"
check
grep -Eq '^name: "?main-1"?$' "${dirs[1]}/job.yaml" && grep -q 'lr: 0.003$' "${dirs[1]}/job.yaml" ||
  fail "point 1's resolved job is not named main-1 with lr 0.003: $(head -3 "${dirs[1]}/job.yaml")"
check
grep -q 'on 2 process' "${dirs[2]}/train.log" ||
  fail "point 2 (devices.processes: 2) did not run on 2 processes: $(head -3 "${dirs[2]}/train.log")"
check
grep -q '3 points: 3 done, 0 failed, 0 running, 0 pending' main.log ||
  fail "the sweep did not print its summary: $(tail -6 main.log)"

# --- the summary CSV: a row per point whose values are the run's own metrics ---
csv=runs/main/summary.csv
check
[[ $(wc -l < "$csv") -eq 4 ]] || fail "summary.csv: expected a header and 3 rows: $(cat "$csv")"
for i in 0 1 2; do
  d=${dirs[$i]}
  check
  for field in status step steps train_loss val_loss tokens_per_s run_dir overrides; do
    got=$(csv_value "$csv" "$field" "$i")
    case $field in
      status) want=done ;;
      step | steps) want=20 ;;
      train_loss) want=$(last_value "$d/metrics.jsonl" loss) ;;
      val_loss) want=$(last_value "$d/metrics.jsonl" val_loss) ;;
      tokens_per_s) want=$(grep '"loss"' "$d/metrics.jsonl" | sed 's/.*"tokens_per_s": \([^,]*\),.*/\1/' |
                             sort -g | sed -n 10p) ;;  # the median of 20: the lower middle
      run_dir) want=$d ;;
      overrides) [[ $i -eq 2 ]] && continue; want=$(sed -n "$((i + 1))p" <<<$'optim.lr=1e-3\noptim.lr=3e-3') ;;
    esac
    [[ -n $want && $got == "$want" ]] || fail "summary.csv row $i: $field is '$got', the run has '$want'"
  done
done
check
grep -q '^2,done,.*,runs/main/2-lr=2e-3_processes=2,optim.lr=2e-3 devices.processes=2$' "$csv" ||
  fail "summary.csv row 2 does not name its overrides: $(tail -1 "$csv")"

# --- a re-run finds every point done and skips it, quickly ---
lines_before=$(cat runs/main/*/metrics.jsonl | wc -l)
start=$(date +%s%N)
expect 0 'point 2: done \(step 20 of 20\); skipped' -- "$bin" sweep main.yaml
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
check
[[ $("$bin" sweep main.yaml 2>&1 | grep -c 'skipped') -eq 3 ]] || fail "the re-run did not skip all 3 points"
check
[[ $elapsed_ms -lt 5000 ]] || fail "the re-run took $elapsed_ms ms; skipping finished points should be fast"
check
[[ $(cat runs/main/*/metrics.jsonl | wc -l) -eq $lines_before ]] || fail "the re-run trained again"

# --- --dry-run lists, --summary reads back ---
expect 0 '^ +1 +done +runs/main/1-lr=3e-3 +optim\.lr=3e-3$' -- "$bin" sweep main.yaml --dry-run
expect 0 'every point: train\.steps=20' -- "$bin" sweep main.yaml --dry-run
expect 0 '3 points: 3 done' -- "$bin" sweep main.yaml --summary
expect 0 '^2 +done +20/20 ' -- "$bin" sweep main.yaml --summary

# --- --index on a fresh directory runs that point only ---
sed -e 's#^name: main#name: main\ndir: fresh\nslurm: {partition: debug, cpus_per_task: 2}#' main.yaml > fresh.yaml
expect 0 'point 1 \(optim\.lr=3e-3\): running' -- "$bin" sweep fresh.yaml --index 1
check
[[ $(ls fresh | grep -c -- '-lr=') -eq 1 && -f fresh/1-lr=3e-3/checkpoints/step_00000020/manifest.json ]] ||
  fail "--index 1 should have run fresh/1-lr=3e-3 only: $(ls fresh)"
expect 0 '3 points: 1 done, 0 failed, 0 running, 2 pending' -- "$bin" sweep fresh.yaml --summary
expect 2 '^error: --index 3: the sweep fresh.yaml has 3 points \(0 to 2\)' -- "$bin" sweep fresh.yaml --index 3

# --- --slurm: the array script, submitted when sbatch is on PATH ---
expect 0 'submit it with: sbatch .*/fresh/sweep\.sbatch' -- \
  "$bin" sweep fresh.yaml --slurm --no-submit --max-parallel 2 --sbatch-arg=--gres=gpu:1
script=fresh/sweep.sbatch
for line in '#SBATCH --array=0-2%2' '#SBATCH --job-name=main' "#SBATCH --output=$PWD/fresh/logs/%A_%a.out" \
            '#SBATCH --requeue' '#SBATCH --signal=B:USR1@120' "#SBATCH --chdir=$PWD" \
            '#SBATCH --partition=debug' '#SBATCH --cpus-per-task=2' '#SBATCH --gres=gpu:1'; do
  check
  grep -qxF -- "$line" "$script" || fail "$script lacks the line '$line'"
done
check
grep -qF "'$(readlink -f "$bin")' sweep '$PWD/fresh.yaml' --index \"\$SLURM_ARRAY_TASK_ID\" &" "$script" ||
  fail "$script does not run this binary's sweep --index: $(grep -- '--index' "$script")"
check
bash -n "$script" || fail "$script is not valid bash"
mkdir -p fakebin
cat > fakebin/sbatch <<'S'
#!/bin/bash
echo "$@" > "$(dirname "$0")/sbatch.args"
echo "4242"
S
cat > fakebin/scontrol <<'S'
#!/bin/bash
[[ $1 == show ]] && { echo "JobId=$3 JobState=RUNNING"; exit 0; }
echo "$@" >> "$(dirname "$0")/scontrol.args"
S
chmod +x fakebin/sbatch fakebin/scontrol
expect 0 'submitted array job 4242' -- env PATH="$PWD/fakebin:$PATH" "$bin" sweep fresh.yaml --slurm
check
[[ $(cat fakebin/sbatch.args 2>/dev/null) == "--parsable $PWD/fresh/sweep.sbatch" ]] ||
  fail "sbatch was not given the script: $(cat fakebin/sbatch.args 2>&1)"
expect 0 'sbatch is not on PATH; on the cluster, submit it with: sbatch ' -- env PATH="$PWD/nobin" "$bin" sweep fresh.yaml --slurm
# The task itself, as Slurm would run it for array index 2.
expect 0 'point 2: done in' -- env SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=2 PATH="$PWD/fakebin:$PATH" bash "$script"
expect 0 '3 points: 2 done, 0 failed, 0 running, 1 pending' -- "$bin" sweep fresh.yaml --summary

# --- Slurm's USR1 before the time limit: passed on, the point stops unfinished, requeued ---
cat > long.yaml <<Y
points: [{train.steps: 100000}]
set: $tiny
Y
"$bin" sweep long.yaml --slurm --no-submit > /dev/null 2>&1
SLURM_JOB_ID=78 SLURM_ARRAY_JOB_ID=77 SLURM_ARRAY_TASK_ID=0 PATH="$PWD/fakebin:$PATH" bash runs/long/sweep.sbatch > long.log 2>&1 &
task=$!
for _ in $(seq 300); do
  grep -qs '"loss"' runs/long/0-steps=100000/metrics.jsonl && break
  sleep 0.1
done
kill -USR1 $task
for _ in $(seq 300); do kill -0 $task 2>/dev/null || break; sleep 0.1; done
check
if kill -0 $task 2>/dev/null; then
  fail "the array task did not stop within 30 s of USR1"
  kill -KILL $task
fi
wait $task
rc=$?
check
[[ $rc -eq 3 ]] || fail "the interrupted task exited $rc, want 3 (unfinished): $(tail -4 long.log)"
check
[[ $(cat fakebin/scontrol.args 2>/dev/null) == "requeue 77_0" ]] ||
  fail "the interrupted task was not requeued: $(cat fakebin/scontrol.args 2>&1); $(tail -4 long.log)"
expect 0 '1 point: 0 done, 0 failed, 0 running, 1 pending' -- "$bin" sweep long.yaml --summary

# --- a point that fails at run time: marked failed, the others still run, exit 1 ---
cat > failing.yaml <<Y
points:
  - {optim.lr: 1e-3}
  - {data.dataset: tokens, data.train: nowhere/train_*.bin, data.val: nowhere/val_*.bin}
  - {optim.lr: 2e-3}
set: $tiny
Y
"$bin" sweep failing.yaml > failing.log 2>&1
rc=$?
check
[[ $rc -eq 1 ]] || fail "a sweep with a failed point exited $rc, want 1: $(tail -3 failing.log)"
check
grep -q '^error: 1 of 3 points failed: 1 (exit 1); see each point' failing.log ||
  fail "no error line naming the failed point: $(tail -3 failing.log)"
check
grep -q 'point 1: failed (exit 1) after .*nowhere/train_\*\.bin' failing.log ||
  fail "the failure line does not quote the point's error: $(grep 'point 1' failing.log)"
check
[[ $(csv_value runs/failing/summary.csv status 0) == done && $(csv_value runs/failing/summary.csv status 1) == failed &&
   $(csv_value runs/failing/summary.csv exit_code 1) == 1 && $(csv_value runs/failing/summary.csv status 2) == done ]] ||
  fail "summary.csv should say done, failed (exit 1), done: $(cat runs/failing/summary.csv)"
expect 0 '1 +failed \(1\) ' -- "$bin" sweep failing.yaml --summary

# --- bad sweep files: one error line, exit 2, nothing run ---
bad() {
  local name="$1" pattern="$2" text="$3" out rc
  printf '%s\n' "$text" > "$name.yaml"
  out=$("$bin" sweep "$name.yaml" 2>&1)
  rc=$?
  check
  if [[ $rc -ne 2 || $(wc -l <<<"$out") -ne 1 ]] || ! grep -Eq -- "^error: $name\.yaml$pattern" <<<"$out"; then
    fail "$name.yaml -> exit $rc (want 2 and one line matching '$pattern'): $out"
  fi
  check
  [[ ! -e runs/$name ]] || fail "$name.yaml: something ran: $(ls runs/$name)"
}
bad unknownkey ":1:1: unknown key 'gird' in the sweep file; did you mean 'grid'\?" 'gird: {optim.lr: [1e-3]}'
bad unknownjob ":1:8: unknown job-spec key 'optim.lrr' in grid; did you mean 'optim.lr'\?" 'grid: {optim.lrr: [1e-3]}'
bad badvalue ":2:21: point 2 \(optim.lr=fast\): expected a float for 'optim.lr', got 'fast'" \
  $'grid: {optim.lr: [1e-3, 3e-3]}\npoints: [{optim.lr: fast}]'
bad empty ": the sweep has no points; add grid:" 'name: empty'
bad duplicate ":2:21: points 0 \(optim.lr=1e-3\) and 1 \(optim.lr=0.001\) give the same job" \
  $'grid: {optim.lr: [1e-3]}\npoints: [{optim.lr: 0.001}]'
bad nobase ":1:1: cannot open the base job 'nowhere.yaml'" $'base: nowhere.yaml\npoints: [{}]'
bad reserved ":1:11: 'log.dir' in points\[0\] is set by the sweep; set dir:" 'points: [{log.dir: x}]'
expect 2 '^error: missing\.yaml: cannot open the sweep file' -- "$bin" sweep missing.yaml
expect 2 'excludes|--dry-run' -- "$bin" sweep main.yaml --dry-run --summary
expect 2 'requires|needs|--slurm' -- "$bin" sweep main.yaml --no-submit

# --- the man page documents the subcommand and every option the parser has ---
expect 0 'Usage|usage' -- "$bin" sweep --help
if [[ -f $man_page ]]; then
  man_text=$(sed -e 's/\\-/-/g' "$man_page")
  for option in $("$bin" sweep --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
    [[ $option == --help ]] && continue
    check
    grep -qF -- "$option" <<<"$man_text" && grep -qE '^\.B singularity sweep' <<<"$man_text" ||
      fail "man/singularity.1 does not document 'sweep $option'"
  done
fi

finish
