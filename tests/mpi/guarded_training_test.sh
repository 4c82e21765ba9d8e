#!/usr/bin/env bash
# Runs test_guarded_training for each configuration at its process count.
set -uo pipefail
test_bin="$1"
flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0 runs=0
for run in "1 gpt" "2 gpt-data" "2 gpt-det" "2 gpt-zero2" "2 gpt-tensor" "2 gpt-tensor-det" \
           "2 gpt-pipe" "4 gpt-3d" \
           "2 gpt-pipe-full" "2 gpt-tensor-selective" "1 resnet" "1 resnet-full" "2 resnet-syncbn" \
           "2 resnet-pipe"; do
  set -- $run
  runs=$((runs + 1))
  if ! OMP_NUM_THREADS=1 timeout 300 mpirun "${flags[@]}" -np "$1" "$test_bin" "$scratch/$2" "$2"; then
    echo "FAIL: $2 on $1 process(es)"
    failures=$((failures + 1))
  fi
done
echo "$((runs - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
