#!/usr/bin/env bash
# Inputs and outputs that are not what they are named like, and the documented limits (README
# "Limits"), through the CLI; each check failed before its fix:
# - `prepare --emit-text` leaves a symlink or a device node as it is (it became a regular file;
#   as root this replaced /dev/full), with one line naming it;
# - an encoder.json of 70,000 tokens is refused before any shard (id 69999 was written as 4463);
#   an encoder.json that is a directory is named as one;
# - a symlink loop under a prepare source is one line naming the link (a raw filesystem error);
# - a JPEG claiming 65500x65500 is a problem for `prepare imagenet` (which said "problems: 0", and
#   took 12.6 GB with --full-decode);
# - a FIFO named like an image in data.root is named by `plan` and skipped by `train` (training
#   hung in fopen); a folder named .JPEG no longer ends training with std::bad_alloc.
# The ImageNet checks need SINGULARITY_TEST_DATA's sample images and are skipped without them.
set -uo pipefail
bin=$(realpath "$1")
config=$(cd "$(dirname "$0")/../../configs" && pwd)/resnet-tiny-imagenet.yaml
source "$(dirname "$0")/run_lib.sh"
data=${SINGULARITY_TEST_DATA:-}
export OMP_NUM_THREADS=2

# A byte-level BPE vocabulary of $2 tokens in GPT-2's format, in folder $1: the 256 byte tokens,
# fillers, <|endoftext|>, and "zz" (the highest id, from the one merge "z z").
make_vocab() {
  mkdir -p "$1"
  python3 - "$1" "$2" <<'EOF'
import json, sys
folder, n = sys.argv[1], int(sys.argv[2])
printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
alphabet, extra = {}, 0
for b in range(256):
    if b in printable:
        alphabet[b] = chr(b)
    else:
        alphabet[b] = chr(256 + extra)
        extra += 1
encoder = {alphabet[b]: b for b in range(256)}
encoder.update({"#%d" % i: i for i in range(256, n - 2)})
encoder["<|endoftext|>"] = n - 2
encoder["zz"] = n - 1
json.dump(encoder, open(folder + "/encoder.json", "w"))
open(folder + "/vocab.bpe", "w").write("#version: 0.2\nz z\n")
EOF
}
# check_error CODE PATTERN -- command...: exits with CODE and prints exactly one error line,
# which matches PATTERN.
check_error() {
  local code="$1" pattern="$2"
  shift 3
  expect "$code" "^error: .*$pattern" -- "$@"
  local lines
  lines=$(grep -c '^error:' <<<"$expect_out")
  [[ $lines -eq 1 ]] || fail "$* -> $lines error lines, want one"
}

make_vocab tok 300
export SINGULARITY_TOKENIZER=$PWD/tok
printf "zz zz zz" > in.txt

# --emit-text: a symlink and a device node are left as they are; a regular file is replaced.
echo "keep me" > target.txt
ln -s target.txt link.txt
check_error 1 "--emit-text link.txt: is a symbolic link.*regular file" -- \
  "$bin" prepare text in.txt out --emit-text link.txt
check
[[ -L link.txt && $(cat target.txt) == "keep me" && ! -e out ]] || fail "the symlink or its target changed"
if mknod full c 1 7 2>/dev/null; then  # a copy of /dev/full, so the real one is never at risk
  check_error 1 "--emit-text full: is a character device" -- \
    "$bin" prepare text in.txt out --emit-text full
  check
  [[ -c full ]] || fail "the device node was replaced: $(ls -l full)"
else
  echo "skipped: the device-node check needs mknod (root)"
fi
echo old > emitted.txt
"$bin" prepare text in.txt out --emit-text emitted.txt --val-tokens 1 > /dev/null 2>&1
check
[[ $(cat emitted.txt) == "zz zz zz" ]] || fail "--emit-text did not replace a regular file: $(cat emitted.txt)"

# Vocabulary size: 70,000 tokens are refused before DST exists; 65,536 work, id 65535 intact.
make_vocab big 70000
check_error 1 "big/encoder.json: 70000 tokens, more than the 65536" -- \
  "$bin" prepare text in.txt out70k --tokenizer big
check
[[ ! -e out70k ]] || fail "out70k was created for a vocabulary that is refused"
make_vocab max 65536
"$bin" prepare text in.txt out64k --tokenizer max --val-tokens 1 > max.log 2>&1
check
ids=$(python3 -c "
import struct, sys
b = open('out64k/train_000000.bin', 'rb').read()[1024:]
print(sorted(set(struct.unpack('<%dH' % (len(b) // 2), b))))" 2>&1)
[[ $ids == "[32, 65535]" ]] || fail "65,536-token vocabulary: train ids $ids, want [32, 65535]: $(tail -2 max.log)"
mkdir -p dirtok/encoder.json
cp tok/vocab.bpe dirtok/
check_error 1 "dirtok/encoder.json: is a directory" -- "$bin" prepare text in.txt outdir --tokenizer dirtok

# A symlink loop under a source, for both walkers; a self-link too.
mkdir -p src/sub
echo "some text" > src/a.txt
ln -s .. src/sub/up
check_error 1 "src/sub/up: a symbolic link loop.*remove or fix the link" -- "$bin" prepare text src outloop
check_error 1 "src/sub/up: a symbolic link loop" -- "$bin" prepare openwebtext src outloop
rm src/sub/up
ln -s self.txt src/self.txt
check_error 1 "src/self.txt: a symbolic link loop" -- "$bin" prepare text src outloop

if [[ -z "$data" || ! -d "$data/imagenet/sample" ]]; then
  echo "skipped: the ImageNet checks (SINGULARITY_TEST_DATA/imagenet/sample not found)"
  finish
  exit $?
fi

# A decompression bomb: a real sample whose frame header claims 65500 x 65500.
sample=$(ls "$data"/imagenet/sample/*.JPEG | head -1)
wnid=$(basename "$sample" | cut -d_ -f1)
mkdir -p "tree/train/$wnid" "tree/val/$wnid"
ln -s "$sample" "tree/train/$wnid/good.JPEG"
ln -s "$sample" "tree/val/$wnid/good.JPEG"
python3 - "$sample" "tree/train/$wnid/bomb.JPEG" <<'EOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = next(i for i in range(2, len(b) - 9) if b[i] == 0xFF and 0xC0 <= b[i + 1] <= 0xC2)
b[i + 5:i + 9] = (65500).to_bytes(2, "big") * 2
open(sys.argv[2], "wb").write(b)
EOF
out=$(timeout -k 5 60 "$bin" prepare imagenet tree idx --strict 2>&1)
rc=$?
check
if [[ $rc -ne 1 ]] || ! grep -q "problems: 1" <<<"$out" ||
   ! grep -q "bomb.JPEG: 65500x65500 = 4290250000 pixels, over the 89478485-pixel limit" <<<"$out"; then
  fail "prepare imagenet did not report the bomb (exit $rc): $(grep -A2 problems <<<"$out")"
else  # only then: before the limit this took 12.6 GB
  start=$SECONDS
  out=$(timeout -k 5 60 "$bin" prepare imagenet tree idx --strict --full-decode 2>&1)
  rc=$?
  check
  [[ $rc -eq 1 && $((SECONDS - start)) -le 20 ]] && grep -q "problems: 1" <<<"$out" ||
    fail "--full-decode: exit $rc after $((SECONDS - start)) s: $(grep -A2 problems <<<"$out")"
fi

# A FIFO and a folder named like images in a flat data.root.
mkdir flat
ln -s "$sample" "flat/$(basename "$sample")"
mkfifo flat/n01440764_fifo.JPEG
mkdir flat/n01440764_folder.JPEG
job=("$config" --set data.root="$PWD/flat" --set train.steps=1 --set eval.every=0
     --set checkpoint.every=0 --set log.dir=run)
expect 0 "2 problem\(s\).*n01440764_fifo.JPEG: is a FIFO \(named pipe\), not an image file; skipped" -- \
  timeout -k 5 60 "$bin" plan "${job[@]}"
out=$(timeout -k 5 120 "$bin" train "${job[@]}" 2>&1)
rc=$?
check
[[ $rc -eq 0 ]] && ! grep -q "bad_alloc" <<<"$out" ||
  fail "train with a FIFO and a folder named .JPEG in data.root: exit $rc: $(tail -2 <<<"$out")"

finish
