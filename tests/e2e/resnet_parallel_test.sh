#!/usr/bin/env bash
# ResNet under mpirun (oversubscribed on a 2-core machine), issue #8:
# - deterministic mode: data = 4 on 1, 2 and 4 processes (and ZeRO-1 on 2) gives bitwise
#   identical losses, evaluations, weights, running statistics and SGD momentum;
# - resume: stopped on 2 processes, resumed on 4, bitwise the uninterrupted run;
# - the same two in bf16 (bf16 activations, convolutions and products), whose bits differ from
#   fp32's, and a bf16 pipeline of 2 stages bitwise one process (fp32 between the stages);
# - pipeline: stages at block boundaries, gpipe == 1f1b, both equal to one process;
# - synchronised batch norm: data 4 on 1, 2 and 4 processes equals one replica of the whole batch;
# - eval reports top-1/top-5; tensor parallelism is refused at plan time, saying why.
set -uo pipefail
bin=$(realpath "$1")
source "$(dirname "$0")/run_lib.sh"

# ResNet-10, 8 wide, 32x32 synthetic images, 10 classes: about 80k parameters.
cat > rn.yaml <<'Y'
name: rn
seed: 5
model: {arch: resnet, depth: 10, width: 8, classes: 10, image_size: 32}
data: {dataset: synthetic, synthetic_images: 1000}
optim: {name: sgd, lr: 0.02, min_lr: 0.001, warmup_steps: 2, momentum: 0.9, nesterov: true, weight_decay: 1.0e-4, grad_clip: 0}
train: {steps: 6, global_batch: 16, micro_batch: 2}
eval: {every: 3, steps: 2}
parallel: {data: 4}
devices: {threads: 1}
checkpoint: {every: 3, resume: never}
Y

# run_lib.sh's math_lines and same_bits, with the evaluations and 6 steps.
math_lines() { grep -v '"grad_norm"' "$1/metrics.jsonl"; grep '"grad_norm"' "$1/metrics.jsonl" | sed 's/, "step_ms".*//'; }
# run NAME PROCESSES [extra --set ...]
run() {
  local name=$1 n=$2
  shift 2
  timeout 120 "$bin" train rn.yaml --set log.dir="$name" --set devices.processes="$n" "$@" \
    > "$name.log" 2>&1 || fail "$name: exit $?: $(tail -2 "$name.log")"
}
same_bits() {  # losses, evaluations, final weights (with running statistics) and momentum
  [[ $(losses "$1" | wc -l) -eq 6 ]] && diff <(math_lines "$1") <(math_lines "$2") > /dev/null &&
    cmp -s "$1/checkpoints/step_00000006/model.safetensors" "$2/checkpoints/step_00000006/model.safetensors" &&
    cmp -s "$1/checkpoints/step_00000006/optimizer.safetensors" "$2/checkpoints/step_00000006/optimizer.safetensors"
}

# --- Deterministic: data 4 on 1, 2 and 4 processes; ZeRO-1 on 2 --------------------------
check
run det-1 1 --set train.deterministic=true
grep -q '"images_per_s"' det-1/metrics.jsonl || fail "metrics.jsonl has no images_per_s"
grep -q '"val_top1"' det-1/metrics.jsonl || fail "metrics.jsonl has no val_top1"
for variant in "2" "4" "2 --set parallel.zero=1"; do
  check
  set -- $variant
  name=det-$1${3:+-zero1}
  run "$name" "$@" --set train.deterministic=true
  same_bits det-1 "$name" && echo "deterministic: $name is bitwise identical to 1 process" ||
    fail "deterministic: $name differs from 1 process"
done
# The running statistics changed (they are in the checkpoint that was compared).
check
"$bin" eval --checkpoint det-1 > eval.log 2>&1 || fail "eval: $(tail -2 eval.log)"
grep -qE "top-1 [0-9.]+%, top-5 [0-9.]+%" eval.log || fail "eval does not report top-1/top-5: $(tail -2 eval.log)"
grep -q "val loss" eval.log && echo "eval: $(grep 'val loss' eval.log)"

# --- Resume: stopped on 2 processes, resumed on 4 ----------------------------------------
check
run det-rs 2 --set train.deterministic=true --stop-after 3
run det-rs 4 --set train.deterministic=true --set checkpoint.resume=auto
grep -q "resumed from .*step_00000003 at step 3" det-rs.log || fail "did not resume at step 3"
same_bits det-1 det-rs && echo "deterministic resume 2 -> 4 processes: bitwise identical" ||
  fail "deterministic resume differs from the uninterrupted run"

# --- bf16: deterministic on 1, 2 and 4 processes, and resumed 2 -> 4 ---------------------
check
run bf-1 1 --set train.deterministic=true --set train.precision=bf16
! diff -q <(math_lines det-1) <(math_lines bf-1) > /dev/null ||
  fail "bf16 gave fp32's bits: its convolutions and products were not bf16"
for n in 2 4; do
  run bf-$n $n --set train.deterministic=true --set train.precision=bf16
  same_bits bf-1 bf-$n && echo "bf16 deterministic: $n processes bitwise identical to 1" ||
    fail "bf16 deterministic: $n processes differ from 1"
done
run bf-rs 2 --set train.deterministic=true --set train.precision=bf16 --stop-after 3
run bf-rs 4 --set train.deterministic=true --set train.precision=bf16 --set checkpoint.resume=auto
same_bits bf-1 bf-rs && echo "bf16 deterministic resume 2 -> 4 processes: bitwise identical" ||
  fail "bf16 deterministic resume differs from the uninterrupted run"
# Two pipeline stages in bf16: the activations are bf16, the stages exchange fp32 (each side
# converts, exactly), so the run is one process's bit for bit.
check
run bf-pp 2 --set train.deterministic=true --set train.precision=bf16 --set parallel.pipeline=2 \
  --set parallel.data=2
run bf-pp-one 1 --set train.deterministic=true --set train.precision=bf16 --set parallel.data=2
same_bits bf-pp-one bf-pp && echo "bf16 pipeline 2: bitwise one process" ||
  fail "bf16 pipeline 2 differs from one process"

# --- Pipeline: blocks split over stages; gpipe and 1f1b; equal to one process ------------
check
run pp-1f1b 2 --set parallel.pipeline=2 --set parallel.data=2
run pp-gpipe 2 --set parallel.pipeline=2 --set parallel.data=2 --set parallel.schedule=gpipe
run pp-none 1 --set parallel.data=2
same_bits pp-1f1b pp-gpipe && echo "pipeline: gpipe == 1f1b bitwise" || fail "pipeline: gpipe differs from 1f1b"
worst=$(worst_relative pp-none pp-1f1b)
echo "pipeline 2 vs one process: worst relative loss difference $worst"
awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }' || fail "pipeline: losses differ by $worst"
# Three stages on 6 processes: the two replicas on different processes, their gradients summed
# by MPI as data 2 on 2 processes sums them (a ResNet with 2-image batch norms amplifies that
# rounding, so compare with the run that rounds the same way: bitwise).
check
run pp-3 6 --set parallel.pipeline=3 --set parallel.data=2
run dp-2 2 --set parallel.data=2
diff <(losses dp-2) <(losses pp-3) > /dev/null && [[ $(losses pp-3 | wc -l) -eq 6 ]] &&
  echo "pipeline 3 x data 2 on 6 processes: the losses of data 2 on 2 processes, bitwise" ||
  fail "pipeline 3 on 6 processes differs from data 2 on 2: $(losses pp-3 | tr '\n' ' ') vs $(losses dp-2 | tr '\n' ' ')"

# --- Synchronised batch norm: statistics over all 4 replicas = one replica of 16 ---------
check
run whole 1 --set parallel.data=1 --set train.micro_batch=16
for n in 1 2 4; do
  run sync-$n $n --set model.sync_bn=true --set train.micro_batch=4
  worst=$(worst_relative whole sync-$n)
  echo "sync_bn on $n process(es) vs one replica of the whole batch: worst relative loss difference $worst"
  awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }' || fail "sync_bn on $n: losses differ by $worst"
done
# Without sync_bn each replica normalises by its own 4 images: a different result.
run local 1 --set train.micro_batch=4
worst=$(worst_relative whole local)
awk -v w="$worst" 'BEGIN { exit !(w > 1e-4) }' || fail "per-replica batch norm equals the synchronised one ($worst)"

# plan counts the fused batch and the evaluation stage of synchronised batch norm.
check
"$bin" plan rn.yaml --set model.sync_bn=true > plan-sync.log 2>&1 || fail "plan with sync_bn: $(tail -2 plan-sync.log)"
"$bin" plan rn.yaml > plan-local.log 2>&1 || fail "plan: $(tail -2 plan-local.log)"
grep -q "micro-batch 8 images.*4 replicas together for sync_bn" plan-sync.log ||
  fail "plan does not count the fused batch: $(grep activations plan-sync.log)"
grep -q "micro-batch 2 images" plan-local.log || fail "plan without sync_bn: $(grep activations plan-local.log)"

# --- Refused meshes and combinations ------------------------------------------------------
check
"$bin" plan rn.yaml --set parallel.tensor=2 --set devices.processes=2 > bad.log 2>&1
rc=$?
[[ $rc -eq 2 ]] && grep -q "a ResNet has no tensor parallelism" bad.log || fail "tensor 2: exit $rc: $(head -2 bad.log)"
check
"$bin" plan rn.yaml --set parallel.pipeline=5 --set devices.processes=5 > bad2.log 2>&1
rc=$?
[[ $rc -eq 2 ]] && grep -q "exceeds the 4 residual blocks" bad2.log || fail "pipeline 5: exit $rc: $(head -2 bad2.log)"
check
"$bin" plan rn.yaml --set train.deterministic=true --set devices.threads=auto > bad3.log 2>&1
rc=$?
[[ $rc -eq 2 ]] && grep -q "needs devices.threads set" bad3.log || fail "deterministic without threads: exit $rc: $(head -2 bad3.log)"

finish
