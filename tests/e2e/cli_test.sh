#!/usr/bin/env bash
# Command-line contract: --help and --version, exit codes (usage/spec errors 2, runtime 1),
# one-line errors naming file:line:column, plan output, info.
set -uo pipefail
bin="$1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
failures=0
pass=0

# expect CODE PATTERN -- command...: runs the command, checks its exit code and that its
# combined output matches the extended regex PATTERN.
expect() {
  local code="$1" pattern="$2"
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $code ]] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> exit $rc (want $code), output:"
    echo "$out" | head -5
    failures=$((failures + 1))
  else
    pass=$((pass + 1))
  fi
}

expect 0 'singularity [0-9]+\.[0-9]+' -- "$bin" --version
expect 0 'train.*plan.*eval.*sample.*prepare.*info' -- bash -c "'$bin' --help | tr '\n' ' '"
for sub in train plan eval sample prepare info sweep export report; do
  expect 0 'Usage|usage' -- "$bin" "$sub" --help
done

# The man page documents every subcommand and every option the real parser accepts.
man_page="${SINGULARITY_SOURCE_ROOT:-}/man/singularity.1"
if [[ -f $man_page ]]; then
  man_text=$(sed -e 's/\\-/-/g' "$man_page")
  for sub in train plan eval sample prepare info sweep export report; do
    for option in $("$bin" "$sub" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
      [[ $option == --help ]] && continue
      if grep -qF -- "$option" <<<"$man_text" && grep -qE "^\.B singularity $sub" <<<"$man_text"; then
        pass=$((pass + 1))
      else
        echo "FAIL: man/singularity.1 does not document '$sub $option'"
        failures=$((failures + 1))
      fi
    done
  done
fi
expect 2 'subcommand|required' -- "$bin"
expect 2 "unknown command 'nonsense'" -- "$bin" nonsense
expect 2 'missing.yaml' -- "$bin" train missing.yaml

cat > syntax.yaml <<'Y'
name: x
model:
  n_layer: [1, 2
Y
expect 2 '^error: syntax\.yaml:[0-9]+:[0-9]+: ' -- "$bin" plan syntax.yaml

cat > unknown.yaml <<'Y'
name: x
optim:
  lrr: 0.1
Y
expect 2 '^error: unknown\.yaml:3:3: .*did you mean .optim\.lr' -- "$bin" plan unknown.yaml

cat > type.yaml <<'Y'
name: x
train:
  steps: ten
Y
expect 2 '^error: type\.yaml:3:[0-9]+: .*train\.steps' -- "$bin" plan type.yaml

cat > batch.yaml <<'Y'
name: x
train: {global_batch: 30, micro_batch: 4}
Y
expect 2 '^error: batch\.yaml:2:[0-9]+: .*global_batch.*divisible' -- "$bin" plan batch.yaml

expect 2 'set.*optim\.lr.*' -- "$bin" plan --set optim.lr=fast
expect 2 'did you mean' -- "$bin" plan --set optim.lrr=0.1

# A good plan prints the resolved spec, parameters, FLOPs and memory.
expect 0 'parameters: +[0-9]+' -- "$bin" plan
expect 0 'optimizer state' -- "$bin" plan
# Muon's host scratch is counted, and its GPU refusal names the way out.
expect 0 'muon scratch +[0-9.]+ (KiB|MiB)' -- "$bin" plan --set optim.name=muon --set model.arch=llama
expect 2 'optim.name muon runs on the CPU backend for now.*devices.backend: cpu' -- "$bin" plan --set optim.name=muon --set devices.backend=cuda
expect 0 'n_layer: 12' -- "$bin" plan --set model.n_layer=12

# Runtime errors exit 1: a dataset glob that matches nothing.
cat > nodata.yaml <<'Y'
name: nodata
model: {n_layer: 1, n_head: 2, n_embd: 32, context: 16, vocab: 64}
data: {dataset: tokens, train: nowhere/train_*.bin, val: nowhere/val_*.bin}
train: {steps: 1, global_batch: 2, micro_batch: 2}
Y
expect 1 'nowhere/train_\*\.bin' -- "$bin" train nodata.yaml

# A truncated shard is reported by name.
mkdir -p shards
printf 'garbage' > shards/train_000.bin
cp shards/train_000.bin shards/val_000.bin
sed -e 's#nowhere#shards#g' nodata.yaml > badshard.yaml
expect 1 'shards/(train|val)_000\.bin' -- "$bin" train badshard.yaml

# Every shipped config validates: plan prints the whole plan, then the data, which is there
# (exit 0) or not prepared on this machine (exit 1, "NOT READY"); never a spec error.
for config in "${SINGULARITY_SOURCE_ROOT:-/nonexistent}"/configs/*.yaml; do
  [[ -f $config ]] || continue
  out=$("$bin" plan "$config" 2>&1)
  rc=$?
  if grep -q 'flops per step' <<<"$out" &&
     { [[ $rc -eq 0 ]] || { [[ $rc -eq 1 ]] && grep -q '^data: *NOT READY' <<<"$out"; }; }; then
    pass=$((pass + 1))
  else
    echo "FAIL: plan $config -> exit $rc: $(tail -n 2 <<<"$out")"
    failures=$((failures + 1))
  fi
done

# plan --json: one JSON object with the documented sections; data checked.
json_check() {  # $1: expected data.ok (True/False); the JSON on stdin
  python3 -c 'import json, sys
j = json.load(sys.stdin)
keys = {"source", "spec", "model", "flops", "mesh", "device_map", "micro_steps", "memory", "data"}
assert keys <= set(j), sorted(keys - set(j))
assert j["spec"]["train"]["steps"] == 400 and j["mesh"]["data"] >= 1
assert len(j["device_map"]["map"]) == j["device_map"]["processes"]
assert j["memory"]["total_bytes"] > 0 and j["model"]["parameters"] > 0
assert str(j["data"]["ok"]) == sys.argv[1], j["data"]' "$1"
}
if "$bin" plan --json | json_check True; then pass=$((pass + 1)); else
  echo "FAIL: plan --json of the quickstart"; failures=$((failures + 1)); fi
"$bin" plan --json --set data.dataset=tokens --set 'data.train=nowhere/train_*.bin' \
  --set 'data.val=nowhere/val_*.bin' > nodata.json 2> nodata.err
rc=$?
if [[ $rc -eq 1 ]] && json_check False < nodata.json && grep -q 'data is not ready' nodata.err; then
  pass=$((pass + 1))
else
  echo "FAIL: plan --json without data: exit $rc, $(cat nodata.err)"; failures=$((failures + 1))
fi

# plan --gpu: the step estimated on a named GPU (docs/gpu.md "Estimates"); an unknown name is
# a usage error listing the known ones.
expect 0 'gpu estimate: +NVIDIA H200 SXM, fp32 .* ms a step .*% MFU' -- "$bin" plan --gpu h200
expect 0 'matmul_backward +[0-9.]+ ms' -- "$bin" plan --gpu a100 --set train.precision=bf16 \
  --set devices.backend=cuda
expect 0 'conv2d_backward +[0-9.]+ ms' -- "$bin" plan --gpu h100 --set model.arch=resnet \
  --set model.depth=18 --set model.classes=10 --set model.image_size=64
expect 2 "^error: --gpu 'h300' .*h200, h100" -- "$bin" plan --gpu h300
if "$bin" plan --json --gpu h200 --set train.precision=bf16 --set devices.backend=cuda | python3 -c 'import json, sys
g = json.load(sys.stdin)["gpu_estimate"]
assert g["gpu"] == "h200" and 0 < g["mfu"] < 1 and g["step_seconds"] > 0, g
assert g["ops"] and g["ops"][0]["seconds"] >= g["ops"][-1]["seconds"]
assert abs(sum(o["seconds"] for o in g["ops"]) - g["step_seconds"]) < 1e-9'; then
  pass=$((pass + 1))
else
  echo "FAIL: plan --json --gpu h200"; failures=$((failures + 1))
fi

expect 0 'backends: cpu' -- "$bin" info
# Idle threads: the re-execution sets passive OpenMP waiting and short OpenBLAS spinning where
# they are unset (src/backend/blas_core.h), and leaves a user's own values alone (a spin count
# alone included: the passive policy would override it).
unset_threads=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OPENBLAS_THREAD_TIMEOUT
               -u SINGULARITY_BLAS_REEXEC)
expect 0 'threads: OMP_WAIT_POLICY=passive, GOMP_SPINCOUNT=unset, OPENBLAS_THREAD_TIMEOUT=16' -- \
  "${unset_threads[@]}" "$bin" info
expect 0 'threads: OMP_WAIT_POLICY=active, GOMP_SPINCOUNT=unset, OPENBLAS_THREAD_TIMEOUT=20' -- \
  "${unset_threads[@]}" OMP_WAIT_POLICY=active OPENBLAS_THREAD_TIMEOUT=20 "$bin" info
expect 0 'threads: OMP_WAIT_POLICY=unset, GOMP_SPINCOUNT=500, OPENBLAS_THREAD_TIMEOUT=16' -- \
  "${unset_threads[@]}" GOMP_SPINCOUNT=500 "$bin" info
# The ranks it launches itself inherit the same: a stand-in mpirun shows what they get.
mkdir -p fakebin
printf '#!/bin/sh\necho "ranks: OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}"\n' > fakebin/mpirun
chmod +x fakebin/mpirun
expect 0 'ranks: OMP_WAIT_POLICY=passive' -- \
  "${unset_threads[@]}" PATH="$PWD/fakebin:$PATH" "$bin" train --set devices.processes=2
expect 2 'prompt' -- "$bin" sample --checkpoint nowhere

echo "$pass passed, $failures failed"
[[ $failures -eq 0 ]]
