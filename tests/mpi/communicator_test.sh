#!/usr/bin/env bash
# Runs test_communicator under mpirun on 2 and 3 processes (an odd group: uneven rings).
set -uo pipefail
test_bin="$1"
flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && flags+=(--allow-run-as-root)
failures=0
for np in 2 3; do
  if ! OMP_NUM_THREADS=1 timeout 120 mpirun "${flags[@]}" -np "$np" "$test_bin"; then
    echo "FAIL: $np processes"
    failures=$((failures + 1))
  fi
done
[[ $failures -eq 0 ]]
