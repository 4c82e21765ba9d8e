# Shared by the multi-run e2e scripts (sourced): a scratch directory removed on exit, checks
# that count one failure however many of their steps fail, and reading losses back from a run
# directory's metrics.jsonl.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
checks=0 failures=0 failed_this=0
# Each check starts with `check`; a check fails once however many of its steps fail.
check() { checks=$((checks + 1)); failed_this=0; }
fail() {
  echo "FAIL: $*"
  if [[ $failed_this -eq 0 ]]; then failures=$((failures + 1)); failed_this=1; fi
}
# expect CODE PATTERN -- command...: the exit code, and the combined output matches PATTERN.
# The output stays in $expect_out for checks of its own.
expect() {
  local code="$1" pattern="$2"
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  expect_out="$out"
  check
  if [[ $rc -ne $code ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    fail "$* -> exit $rc (want $code, output matching '$pattern'):"
    echo "$out" | head -8
  fi
}
# The per-step lines of run directory $1's metrics without their timings: what must match
# bitwise between runs that compute the same thing.
math_lines() { grep '"grad_norm"' "$1/metrics.jsonl" | sed 's/, "step_ms".*//'; }
# same_bits A B [STEPS=10]: STEPS step lines, the same losses and norms, and the same final
# weights and optimizer state (the checkpoint at step STEPS).
same_bits() {
  local steps=${3:-10}
  local ck=checkpoints/step_$(printf %08d "$steps")
  [[ $(math_lines "$1" | wc -l) -eq $steps ]] && diff <(math_lines "$1") <(math_lines "$2") > /dev/null &&
    cmp -s "$1/$ck/model.safetensors" "$2/$ck/model.safetensors" &&
    cmp -s "$1/$ck/optimizer.safetensors" "$2/$ck/optimizer.safetensors"
}
# The per-step training losses of run directory $1, one per line.
losses() { grep '"grad_norm"' "$1/metrics.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }
# The worst relative difference of two runs' per-step losses.
worst_relative() {
  paste <(losses "$1") <(losses "$2") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; r = d / $1; if (r > m) m = r } END { printf "%.3g", m }'
}
# Exits with the summary line: "N passed, M failed".
finish() {
  echo "$(( checks - failures )) passed, $failures failed"
  [[ $failures -eq 0 ]]
}
