#!/usr/bin/env python3
"""Writes the generated seed inputs of the libFuzzer targets (docs/faults.md "Fuzzing").

    make_seeds.py OUT_DIR [SOURCE_ROOT]

OUT_DIR/<target>/<name>: valid files made by machine (safetensors, shards, JPEGs, manifests
listing the checkpoint target's fixture files, vocabularies) and the inputs that crashed or hung
the readers in the fault-finding review ("review-*"), most too large to commit. The hand-written
seeds are committed in fuzz/corpus/<target>/. Deterministic: the same files on every run.
"""
import io
import json
import os
import struct
import sys

OUT = sys.argv[1]
ROOT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..")


def put(target, name, data):
    os.makedirs(os.path.join(OUT, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path = os.path.join(OUT, target, name)
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return  # unchanged: keep the file's time
    except OSError:
        pass
    with open(path, "wb") as f:
        f.write(data)


# --- job_spec: the example jobs of configs/ ----------------------------------------------------
configs = os.path.join(ROOT, "configs")
for name in sorted(os.listdir(configs)) if os.path.isdir(configs) else []:
    if name.endswith(".yaml"):
        with open(os.path.join(configs, name), "rb") as f:
            put("job_spec", "config-" + name, f.read())
put("job_spec", "deep-flow-sequence.yaml", "model: " + "[" * 5000 + "]" * 5000 + "\n")


# --- safetensors ---------------------------------------------------------------------------------
def safetensors(header_text, data=b""):
    header = header_text.encode()
    header += b" " * ((-len(header)) % 8)
    return struct.pack("<Q", len(header)) + header + data


put("safetensors", "valid-mixed.safetensors", safetensors(json.dumps({
    "__metadata__": {"format": "pt", "step": "3"},
    "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    "b": {"dtype": "F16", "shape": [4], "data_offsets": [24, 32]},
    "h": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [32, 40]},
    "d": {"dtype": "F64", "shape": [1], "data_offsets": [40, 48]},
    "ids": {"dtype": "I32", "shape": [3], "data_offsets": [48, 60]},
    "s": {"dtype": "U8", "shape": [], "data_offsets": [60, 61]},
    "e": {"dtype": "F32", "shape": [0, 5], "data_offsets": [61, 61]},
}, separators=(",", ":")), bytes(range(61))))
put("safetensors", "overlapping.safetensors", safetensors(
    '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
    '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', bytes(12)))
put("safetensors", "huge-shape.safetensors", safetensors(
    '{"a":{"dtype":"F64","shape":[4294967296,4294967296,8],"data_offsets":[0,8]}}', bytes(8)))
put("safetensors", "header-length-past-end.safetensors",
    struct.pack("<Q", 2**63 + 5) + b'{"a":1}')
# Review: a header nested ~60,000 deep in shape or in data_offsets (stack overflow).
DEEP = 60000
put("safetensors", "review-deep-shape.safetensors", safetensors(
    '{"a":{"dtype":"F32","shape":' + "[" * DEEP + "]" * DEEP + ',"data_offsets":[0,0]}}'))
# Found by fuzzing: a number past double's range (out_of_range.406 escaped parse_bounded_json).
put("safetensors", "found-number-overflow.safetensors", safetensors(
    '{"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}}', bytes(4)))
put("safetensors", "review-deep-data-offsets.safetensors", safetensors(
    '{"a":{"dtype":"F32","shape":[0],"data_offsets":' + "[" * DEEP + "]" * DEEP + "}}"))


# --- checkpoint_manifest: manifests of fuzz/targets/fuzz_checkpoint_manifest.cpp's directory ----
# Its fixture files (keep in step with fixture_safetensors there): sizes and XXH3-64.
FIXTURES = {"model.safetensors": (72, "2e47afed5c84da51"),
            "optimizer.safetensors": (136, "1ff3d50857f8effc")}
FILES = {name: {"bytes": size, "xxh3_64": digest} for name, (size, digest) in FIXTURES.items()}
STATE = {"step": 5, "train_sequences": 40, "seed": 7, "sampler": "feistel-windows-v1",
         "optimizer": "adamw", "model": {"family": "fuzz", "n": 2}}


def manifest(**changes):
    m = {"format": "singularity-checkpoint", "version": 1, "step": 5, "files": FILES,
         "state": dict(STATE), "job_yaml": "name: fuzz\n"}
    for key, value in changes.items():
        if key.startswith("state_"):
            m["state"][key[len("state_"):]] = value
        else:
            m[key] = value
    return json.dumps(m, indent=2) + "\n"


put("checkpoint_manifest", "valid.json", manifest())
put("checkpoint_manifest", "valid-fp16.json",
    manifest(state_loss_scale=65536.0, state_loss_scale_clean_steps=3, state_skipped_steps=2,
             state_skipped_in_row=1))
put("checkpoint_manifest", "valid-old-model-record.json", manifest(state_model={"n": 2}))
put("checkpoint_manifest", "no-files.json", manifest(files={}))
put("checkpoint_manifest", "file-outside.json",
    manifest(files={"../model.safetensors": FILES["model.safetensors"]}))
# Review: out-of-range and wrong-typed values.
put("checkpoint_manifest", "review-step-negative.json", manifest(step=-5, state_step=-5))
put("checkpoint_manifest", "review-state-step-negative.json", manifest(state_step=-5))
put("checkpoint_manifest", "review-step-int64-max.json",
    manifest(step=2**63 - 1, state_step=2**63 - 1))
put("checkpoint_manifest", "review-state-step-1e300.json", manifest(state_step=1e300))
put("checkpoint_manifest", "review-step-1e300.json", manifest(step=1e300))
put("checkpoint_manifest", "review-wrong-types.json",
    manifest(state_step="5", state_train_sequences=[], state_seed=-1, state_loss_scale="x",
             state_skipped_steps=True))
put("checkpoint_manifest", "review-wrong-type-files.json",
    manifest(files={"model.safetensors": {"bytes": "72", "xxh3_64": 5}}))
put("checkpoint_manifest", "review-state-not-object.json", manifest(state=[1, 2]))
put("checkpoint_manifest", "review-version-2pow32-plus-1.json", manifest(version=2**32 + 1))
put("checkpoint_manifest", "review-loss-scale-not-power.json",
    manifest(state_loss_scale=3.0e38, state_skipped_in_row=9))
# Review: nesting ~60,000 deep (stack overflow in a recursive walk).
deep = "[" * DEEP + "]" * DEEP
put("checkpoint_manifest", "review-deep-state.json",
    manifest(state_model="@").replace('"@"', deep))
put("checkpoint_manifest", "review-deep-files.json",
    manifest(files={"model.safetensors": {"bytes": "@", "xxh3_64": "0" * 16}}).replace('"@"', deep))


# --- token_shard ---------------------------------------------------------------------------------
def shard(tokens, count=None, magic=20240520, version=1):
    header = [0] * 256
    header[0:3] = [magic, version, len(tokens) if count is None else count]
    return struct.pack("<256i", *header) + struct.pack("<%dH" % len(tokens), *tokens)


put("token_shard", "valid.bin", shard([i * 7 % 50257 for i in range(300)]))
put("token_shard", "empty.bin", shard([]))
put("token_shard", "count-too-large.bin", shard([1, 2, 3], count=4))
put("token_shard", "count-negative.bin", shard([1, 2], count=-1))
put("token_shard", "count-int32-max.bin", shard([5] * 10, count=2**31 - 1))
put("token_shard", "bad-magic.bin", shard([1], magic=20240519))
put("token_shard", "version-2.bin", shard([1], version=2))
put("token_shard", "odd-size.bin", shard([1, 2]) + b"\x00")
put("token_shard", "header-only-part.bin", shard([])[:600])


# --- wikitext: the review's pathological pages --------------------------------------------------
filler = "Some prose about the subject, with a [[link|label]] and '''bold''' text. " * 5400
put("wikitext", "review-nested-links.txt", "[[a|" * 40000)
put("wikitext", "review-nested-nowrap.txt", "{{nowrap|" * 60000)
put("wikitext", "review-unclosed-template-400k.txt", "Intro {{" + filler)
put("wikitext", "review-unclosed-link-400k.txt", "Intro [[" + filler.replace("[[", "((").replace("]]", "))"))
put("wikitext", "review-escaped-refs.txt", "&lt;ref&gt;" * 100000)
put("wikitext", "unclosed-comment.txt", "Text <!-- " + "a " * 1000)
put("wikitext", "nested-tables.txt", "{|\n|" * 2000 + "\n|}" * 2000)


# --- jpeg (Debian's python3-pil, which scripts/setup installs) -----------------------------------
try:
    from PIL import Image
except ImportError:
    Image = None
    print("make_seeds: no PIL (python3-pil), the jpeg target runs on its committed seeds only",
          file=sys.stderr)

if Image is not None:
    def jpeg(image, **options):
        out = io.BytesIO()
        image.save(out, "JPEG", **options)
        return out.getvalue()

    gradient = Image.new("RGB", (37, 29))
    gradient.putdata([(x * 7 % 256, y * 9 % 256, (x * y) % 256) for y in range(29) for x in range(37)])
    put("jpeg", "rgb-37x29.jpg", jpeg(gradient, quality=80))
    put("jpeg", "rgb-444-progressive.jpg", jpeg(gradient, quality=90, subsampling=0,
                                                progressive=True))
    put("jpeg", "gray-40x24.jpg", jpeg(gradient.convert("L").resize((40, 24))))
    put("jpeg", "cmyk-16x16.jpg", jpeg(gradient.convert("CMYK").resize((16, 16))))
    put("jpeg", "restart-64x48.jpg", jpeg(gradient.resize((64, 48)), quality=70))
    whole = jpeg(gradient, quality=80)
    put("jpeg", "truncated.jpg", whole[: len(whole) * 2 // 3])
    # Review: a JPEG of ~630 bytes claiming 65500 x 65500 pixels (a decompression bomb).
    bomb = bytearray(jpeg(Image.new("RGB", (8, 8), (200, 30, 40))))
    sof = bomb.find(b"\xff\xc0")
    struct.pack_into(">HH", bomb, sof + 5, 65500, 65500)
    put("jpeg", "review-bomb-65500x65500.jpg", bytes(bomb))


# --- metrics_jsonl -------------------------------------------------------------------------------
lines = []
for step in range(1, 21):
    lines.append('{"step": %d, "loss": %s, "lr": 0.0006, "grad_norm": 1.5, "step_ms": 120.5, '
                 '"tokens_per_s": %d, "mfu": 0.31, "peak_mem_bytes": 123456789}'
                 % (step, 4.0 - step / 10, 30000 + step))
    if step % 5 == 0:
        lines.append('{"step": %d, "val_loss": %s, "val_top1": 0.5}' % (step, 3.9 - step / 10))
put("metrics_jsonl", "run-20-steps.jsonl", "\n".join(lines) + "\n" + '{"step": 21, "lo')
put("metrics_jsonl", "deep-line.jsonl",
    '{"step": 3, "loss": ' + "[" * DEEP + "]" * DEEP + "}\n" + lines[0] + "\n")
put("metrics_jsonl", "many-lines.jsonl", (lines[0] + "\n") * 2000)


# --- tokenizer: encoder.json [NUL vocab.bpe] ---------------------------------------------------
def byte_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = byte_to_unicode()
base = {B2U[b]: b for b in range(256)}
merges = [("H", "e"), ("l", "l"), ("He", "ll"), ("Hell", "o"), ("Ġ", "w"), ("o", "r")]
vocab = dict(base)
for left, right in merges:
    vocab[left + right] = len(vocab)
vocab["<|endoftext|>"] = len(vocab)
merges_text = "#version: 0.2\n" + "".join("%s %s\n" % m for m in merges)
put("tokenizer", "small-vocab.bin", json.dumps(vocab) + "\0" + merges_text)
put("tokenizer", "bytes-only.bin", json.dumps({**base, "<|endoftext|>": 256}))
# Review: 70,000 entries, ids past 16 bits (they wrapped around in the uint16 shards).
big = dict(base)
for i in range(256, 70000 - 1):
    big["t%d" % i] = i
big["<|endoftext|>"] = 70000 - 1
put("tokenizer", "review-70000-entries.bin", json.dumps(big) + "\0" + merges_text)
