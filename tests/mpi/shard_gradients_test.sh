#!/usr/bin/env bash
# Runs test_shard_gradients under mpirun for several tensor x pipeline splits and schedules.
set -uo pipefail
test_bin="$1"
flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
failures=0 runs=0
for split in "2 1 1f1b" "4 1 1f1b" "1 2 1f1b" "1 2 gpipe" "1 3 1f1b" "2 2 1f1b" "2 2 gpipe"; do
  set -- $split
  runs=$((runs + 1))
  if ! OMP_NUM_THREADS=1 timeout 120 mpirun "${flags[@]}" -np $(($1 * $2)) "$test_bin" "$1" "$2" "$3"; then
    echo "FAIL: tensor $1 x pipeline $2 ($3)"
    failures=$((failures + 1))
  fi
done
echo "$((runs - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
