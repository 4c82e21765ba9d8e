#!/usr/bin/env bash
# Llama (model.arch llama) under data, tensor and pipeline parallelism, as GPT-2's
# hybrid_parallel_test.sh (issue #33):
# - equivalence: one tiny grouped-query job under several (data, tensor, pipeline) meshes, ZeRO
#   and recompute, per-step losses within a relative 1e-5 of the single-process run; an untied
#   head likewise;
# - Muon: the same equivalence under tensor parallelism and ZeRO, and bitwise determinism;
# - deterministic mode: the same mesh on 1, 2 and 4 (data) and on 4 and 8 (hybrid) processes is
#   bitwise identical;
# - a key/value head count the tensor split does not divide is refused, naming the rule.
set -uo pipefail
bin=$(realpath "$1")
source "$(dirname "$0")/run_lib.sh"

# 3 layers, 4 query heads sharing 2 key/value heads: tensor 2 gives each rank one key/value
# head and its two query heads.
cat > llama.yaml <<'Y'
name: tiny-llama
seed: 5
model: {arch: llama, n_layer: 3, n_head: 4, n_kv_head: 2, n_embd: 32, intermediate_size: 48,
        context: 16, vocab: 200}
data: {dataset: synthetic, synthetic_train_tokens: 20000, synthetic_val_tokens: 2000}
optim: {lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 2}
train: {steps: 10, global_batch: 8, micro_batch: 2}
eval: {every: 5, steps: 2}
devices: {threads: 1}
checkpoint: {every: 10, resume: never}
Y

# run NAME DATA TENSOR PIPELINE PROCESSES [extra --set ...]
run() {
  local name=$1 d=$2 t=$3 p=$4 n=$5
  shift 5
  timeout 120 "$bin" train llama.yaml --set log.dir="$name" --set parallel.data="$d" \
    --set parallel.tensor="$t" --set parallel.pipeline="$p" --set devices.processes="$n" "$@" \
    > "$name.log" 2>&1 || fail "$name: exit $?: $(tail -2 "$name.log")"
}
# near BASE NAME: 10 step lines each, losses within a relative 1e-5.
near() {
  if [[ $(losses "$1" | wc -l) -ne 10 || $(losses "$2" | wc -l) -ne 10 ]]; then
    fail "expected 10 step lines in $1/ and $2/"
    return
  fi
  local worst
  worst=$(worst_relative "$1" "$2")
  echo "$2: worst relative loss difference to $1 $worst"
  awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }' || fail "$2: losses differ by $worst (> 1e-5)"
}

# --- Equivalence over meshes ----------------------------------------------------------------
check
run m-1-1-1 1 1 1 1
grep -q "Llama (3 layers, 4 heads (2 key/value)" m-1-1-1.log || fail "no Llama summary: $(head -5 m-1-1-1.log)"
awk 'NR == 1 { first = $0 } END { exit !($0 < first) }' <(losses m-1-1-1) || fail "the loss did not fall"
for mesh in "2 1 1 2" "1 2 1 2" "1 1 2 2" "2 2 2 8" "1 1 3 3"; do
  set -- $mesh
  check
  run "m-$1-$2-$3" "$1" "$2" "$3" $(($1 * $2 * $3))
  near m-1-1-1 "m-$1-$2-$3"
done
check
run zero1-2-1-1 2 1 1 2 --set parallel.zero=1
near m-1-1-1 zero1-2-1-1
check
run zero2-2-2-1 2 2 1 4 --set parallel.zero=2
near m-1-1-1 zero2-2-2-1
check
run full-1-2-2 1 2 2 4 --set train.recompute=full
near m-1-1-1 full-1-2-2
check
run sel-1-2-1 1 2 1 2 --set train.recompute=selective
near m-1-1-1 sel-1-2-1
check
run untied-1-1-1 1 1 1 1 --set model.tie_embeddings=false
run untied-1-2-2 1 2 2 4 --set model.tie_embeddings=false
near untied-1-1-1 untied-1-2-2
grep -q "tied head" untied-1-1-1.log && fail "model.tie_embeddings=false still reports a tied head"
diff -q <(losses m-1-1-1) <(losses untied-1-1-1) > /dev/null && fail "the untied head trains as the tied one"

# Muon: a split matrix is gathered and orthogonalised whole (tensor), a ZeRO shard's matrices
# are orthogonalised whole after an all-gather of the momentum (zero 1 and 2).
check
run muon-1-1-1 1 1 1 1 --set optim.name=muon
diff -q <(losses m-1-1-1) <(losses muon-1-1-1) > /dev/null && fail "optim.name muon trains as adamw"
for mesh in "2 1 1 2 --set parallel.zero=1" "2 2 1 4 --set parallel.zero=2" "1 2 2 4" "4 1 1 2 --set parallel.zero=1"; do
  set -- $mesh
  check
  name=muon-$1-$2-$3-on-$4${6:+-zero}
  run "$name" "$@" --set optim.name=muon
  near muon-1-1-1 "$name"
done
check
run muon-det-1 4 1 1 1 --set optim.name=muon --set train.deterministic=true
run muon-det-2 4 2 1 4 --set optim.name=muon --set train.deterministic=true --set parallel.zero=1
run muon-det-4 4 2 1 8 --set optim.name=muon --set train.deterministic=true --set parallel.zero=1
same_bits muon-det-2 muon-det-4 && echo "deterministic muon: data 4 x tensor 2, ZeRO-1, on 8 processes is bitwise identical to 4" ||
  fail "deterministic muon: 8 processes differ from 4"
near muon-det-1 muon-det-2
# A Muon run stopped at step 5 and resumed (its momentum from the checkpoint) is bitwise the
# uninterrupted run, here on a ZeRO-1 mesh of two.
check
run muon-whole 2 1 1 2 --set optim.name=muon --set parallel.zero=1 --set checkpoint.every=5
run muon-resumed 2 1 1 2 --set optim.name=muon --set parallel.zero=1 --set checkpoint.every=5 --stop-after 5
run muon-resumed 2 1 1 2 --set optim.name=muon --set parallel.zero=1 --set checkpoint.every=5 --set checkpoint.resume=auto
grep -q "resumed from .*step_00000005" muon-resumed.log || fail "the Muon run did not resume at step 5"
same_bits muon-whole muon-resumed && echo "muon resumed at step 5: bitwise the uninterrupted run" ||
  fail "muon: the resumed run differs from the uninterrupted one"

# --- Deterministic mode across process counts ---------------------------------------------
check
run det-d1 4 1 1 1 --set train.deterministic=true
for n in 2 4; do
  check
  run det-d$n 4 1 1 $n --set train.deterministic=true
  same_bits det-d1 det-d$n && echo "deterministic: data 4 on $n processes is bitwise identical to 1" ||
    fail "deterministic: data 4 on $n processes differs from 1"
done
check
run det-h4 4 2 2 4 --set train.deterministic=true
run det-h8 4 2 2 8 --set train.deterministic=true
same_bits det-h4 det-h8 && echo "deterministic: data 4 x tensor 2 x pipeline 2 on 8 processes is bitwise identical to 4" ||
  fail "deterministic: data 4 x tensor 2 x pipeline 2 on 8 processes differs from 4"

# --- A split the heads do not allow is refused before anything runs ------------------------
check
"$bin" plan llama.yaml --set parallel.tensor=4 --set devices.processes=4 > bad.log 2>&1
rc=$?
[[ $rc -eq 2 ]] && grep -q "model.n_kv_head 2 (and model.n_head 4) must be divisible by parallel.tensor 4" bad.log ||
  fail "tensor 4 with 2 key/value heads: exit $rc: $(head -2 bad.log)"

finish
