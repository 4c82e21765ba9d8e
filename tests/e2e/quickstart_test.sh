#!/usr/bin/env bash
# The README's quickstart: the embedded job trains, its validation loss ends at most half of
# ln(vocab), and `sample` prints generated tokens from its checkpoint.
set -euo pipefail
bin="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

start=$(date +%s)
"$bin" train > train.log
elapsed=$(( $(date +%s) - start ))
cat train.log | tail -5
echo "quickstart took ${elapsed}s"

metrics=runs/quickstart/metrics.jsonl
[[ -f $metrics ]] || { echo "FAIL: no $metrics"; exit 1; }
[[ -f runs/quickstart/job.yaml ]] || { echo "FAIL: no job.yaml"; exit 1; }
first=$(grep val_loss "$metrics" | head -1 | sed 's/.*"val_loss": \([^}]*\)}/\1/')
last=$(grep val_loss "$metrics" | tail -1 | sed 's/.*"val_loss": \([^}]*\)}/\1/')
echo "val loss $first -> $last"
# vocab 512: ln(512) = 6.238; the job must end at or below half of it.
awk -v l="$last" 'BEGIN { exit !(l <= 0.5 * log(512)) }' || { echo "FAIL: val loss $last > ln(512)/2"; exit 1; }
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f) }' || { echo "FAIL: val loss did not fall"; exit 1; }
steps=$(grep -c '"grad_norm"' "$metrics")
[[ $steps -eq 400 ]] || { echo "FAIL: expected 400 step lines, got $steps"; exit 1; }

# eval reproduces the run's last validation loss from its checkpoint.
"$bin" eval --checkpoint runs/quickstart > eval.log
cat eval.log
evaluated=$(sed -n 's/^val loss \([0-9.]*\),.*/\1/p' eval.log)
awk -v e="$evaluated" -v l="$last" 'BEGIN { d = e - l; exit !(e != "" && d < 1e-4 && d > -1e-4) }' ||
  { echo "FAIL: eval gives '$evaluated', the run ended at $last"; exit 1; }

"$bin" sample --checkpoint runs/quickstart --prompt "1 2 3" --tokens 16 > sample.log
cat sample.log
generated=$(grep '^generated:' sample.log | wc -w)
[[ $generated -eq 17 ]] || { echo "FAIL: expected 16 generated tokens"; exit 1; }
echo "PASS"
