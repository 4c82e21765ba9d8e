#!/usr/bin/env bash
# Real data end to end: `prepare` turns each raw sample (text, OpenWebText-style JSONL, a
# Wikipedia dump, an ImageNet tree) into what training reads, and a small GPT trains from the
# token shards through the shipped configs, its loss falling. Needs SINGULARITY_TEST_DATA.
set -uo pipefail
bin="$1"
source_root="$2"
data="${SINGULARITY_TEST_DATA:-}"
if [[ -z "$data" || ! -f "$data/gpt2/encoder.json" ]]; then
  echo "skipped: SINGULARITY_TEST_DATA is not set or lacks gpt2/encoder.json"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export SINGULARITY_TOKENIZER="$data/gpt2"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$bin" prepare text "$data/webtext/tinyshakespeare.txt" data/shakespeare --val-tokens 36059 \
  > text.log 2>&1 || fail "prepare text: $(tail -3 text.log)"
tokens=$(python3 -c "import json; d=json.load(open('data/shakespeare/dataset.json')); print(d.get('tokens', d.get('total_tokens', -1)))" 2>/dev/null)
echo "tinyshakespeare: $tokens tokens"
# 338,025 tokens of text plus the one <|endoftext|> that opens the document.
[[ "$tokens" == "338026" || "$tokens" == "338025" ]] || fail "tinyshakespeare has $tokens tokens, want 338,025 (+1 <|endoftext|>)"

"$bin" prepare openwebtext "$data/webtext/webtext.test.truncated.jsonl" data/openwebtext \
  > owt.log 2>&1 || fail "prepare openwebtext: $(tail -3 owt.log)"
ls data/openwebtext/train_*.bin data/openwebtext/val_*.bin > /dev/null 2>&1 || fail "no openwebtext shards"

"$bin" prepare wikipedia "$data"/wikipedia/enwiki-*.bz2 data/wikipedia --emit-text wiki.txt \
  > wiki.log 2>&1 || fail "prepare wikipedia: $(tail -3 wiki.log)"
grep -q "Anarchism" wiki.txt || fail "the cleaned Wikipedia text lacks the Anarchism article"
! grep -q "{{" wiki.txt || fail "template markup left in the cleaned Wikipedia text"

# Refuses to overwrite a different dataset.
"$bin" prepare text "$data/webtext/openwebtext_first100docs.txt" data/wikipedia > clash.log 2>&1
[[ $? -eq 2 ]] || fail "preparing over another dataset did not exit 2"

# ImageNet: index a tree built from the samples.
mkdir -p imagenet/train
for f in "$data"/imagenet/sample/*.JPEG; do
  wnid=$(basename "$f" | cut -d_ -f1)
  mkdir -p "imagenet/train/$wnid"
  ln -s "$f" "imagenet/train/$wnid/$(basename "$f")"
done
"$bin" prepare imagenet imagenet data/imagenet > imagenet.log 2>&1 || fail "prepare imagenet: $(tail -3 imagenet.log)"
[[ -f data/imagenet/imagenet_index.json ]] || fail "no imagenet index"

# Train briefly from each token dataset with the shipped configs (and Llama's on openwebtext);
# the loss must fall.
for config in gpt-tiny-shakespeare gpt-tiny-openwebtext gpt-tiny-wikipedia llama-tiny-openwebtext; do
  name=${config#gpt-tiny-}
  cfg="$source_root/configs/$config.yaml"
  "$bin" train "$cfg" --set train.steps=30 --set eval.every=30 --set log.dir=run-$name \
    --set checkpoint.every=0 > train-$name.log 2>&1 || { fail "train $name: $(tail -3 train-$name.log)"; continue; }
  first=$(grep val_loss run-$name/metrics.jsonl | head -1 | sed 's/.*"val_loss": \([^}]*\)}/\1/')
  last=$(grep val_loss run-$name/metrics.jsonl | tail -1 | sed 's/.*"val_loss": \([^}]*\)}/\1/')
  echo "$name: val loss $first -> $last"
  awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 1.0) }' || fail "$name: val loss did not fall by 1 nat ($first -> $last)"
done

# Text prompts go through the GPT-2 tokenizer and come back as text.
"$bin" sample "$source_root/configs/gpt-tiny-shakespeare.yaml" --checkpoint run-shakespeare \
  --prompt "ROMEO:" --tokens 8 > sample.log 2>&1 || fail "sample: $(tail -2 sample.log)"
grep -q '^text: *ROMEO:' sample.log || fail "sample printed no text: $(cat sample.log)"

echo "$(( 11 - failures )) passed, $failures failed"
[[ $failures -eq 0 ]]
