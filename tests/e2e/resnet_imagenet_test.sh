#!/usr/bin/env bash
# The tiny ImageNet job (configs/resnet-tiny-imagenet.yaml) on the real sample images of
# $SINGULARITY_TEST_DATA/imagenet: it decodes, trains (the training loss falls), evaluates with
# top-1/top-5, checkpoints and resumes; `prepare imagenet` indexes a tree of the same images and
# training reads that index too. Exits 77 (skipped) without the sample data.
set -uo pipefail
bin=$(realpath "$1")
source_root=$(realpath "$2")
data=${SINGULARITY_TEST_DATA:-}/imagenet
if [[ -z ${SINGULARITY_TEST_DATA:-} || ! -d $data/sample ]]; then
  echo "skipped: SINGULARITY_TEST_DATA/imagenet/sample not found"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
losses() { grep '"grad_norm"' "$1/metrics.jsonl" | sed 's/.*"loss": \([^,]*\),.*/\1/'; }
mean() { awk '{ s += $1; n++ } END { printf "%.4f", s / n }'; }

job="$source_root/configs/resnet-tiny-imagenet.yaml"
common=(--set data.root="$data/sample" --set train.steps=60 --set eval.every=30 --set checkpoint.every=30)
timeout 300 "$bin" train "$job" "${common[@]}" --set log.dir=tiny > tiny.log 2>&1 || fail "train: exit $?: $(tail -3 tiny.log)"
[[ $(losses tiny | wc -l) -eq 60 ]] || fail "expected 60 step lines: $(tail -3 tiny.log)"
first=$(losses tiny | head -10 | mean)
last=$(losses tiny | tail -10 | mean)
echo "tiny imagenet job: mean training loss of the first 10 steps $first, of the last 10 $last"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' || fail "training loss did not fall ($first -> $last)"
grep -q "100 train / 100 val images, 1000 classes" tiny.log || fail "dataset line: $(grep imagenet tiny.log | head -1)"
grep -q '"val_top5"' tiny/metrics.jsonl || fail "no val_top5 in metrics.jsonl"
"$bin" eval --checkpoint tiny > eval.log 2>&1 && grep -q "top-1" eval.log || fail "eval: $(tail -2 eval.log)"

# Resumed from step 30, the same 60 steps.
timeout 300 "$bin" train "$job" "${common[@]}" --set log.dir=resumed --stop-after 30 > r1.log 2>&1 || fail "stop: $(tail -2 r1.log)"
timeout 300 "$bin" train "$job" "${common[@]}" --set log.dir=resumed --set checkpoint.resume=auto > r2.log 2>&1 || fail "resume: $(tail -2 r2.log)"
diff <(losses tiny) <(losses resumed) > /dev/null && echo "resumed at 30: the same 60 losses" || fail "resumed run differs"

# An ILSVRC-2012 tree of the same images, indexed by prepare, trains through the index.
mkdir -p tree/train tree/val
for f in "$data"/sample/*.JPEG; do
  name=$(basename "$f")
  wnid=${name%%_*}
  mkdir -p "tree/train/$wnid" "tree/val/$wnid"
  ln -s "$f" "tree/train/$wnid/$name"
  ln -s "$f" "tree/val/$wnid/$name"
done
ln -s "$data/LOC_synset_mapping.txt" tree/LOC_synset_mapping.txt
"$bin" prepare imagenet tree prepared > prep.log 2>&1 || fail "prepare imagenet: $(tail -2 prep.log)"
timeout 300 "$bin" train "$job" --set data.root=prepared --set train.steps=4 --set eval.every=0 \
  --set log.dir=indexed > idx.log 2>&1 || fail "train from the index: $(tail -2 idx.log)"
grep -q "100 train / 100 val images" idx.log || fail "index dataset line: $(grep imagenet idx.log | head -1)"

[[ $failures -eq 0 ]] && echo "all passed"
[[ $failures -eq 0 ]]
