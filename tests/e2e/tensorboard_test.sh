#!/usr/bin/env bash
# log.tensorboard: a tiny job writes <log.dir>/tb/events.out.tfevents.*, and TensorBoard's own
# reader (EventAccumulator, EventFileLoader, in the interoperability venv of scripts/setup) finds
# every metrics.jsonl value as a scalar of the same tag and step, equal as float32; the first
# record of each file is the file version. A run resumed from a checkpoint before its last steps
# appends a second file whose values supersede the first file's from the resume on, as
# metrics.jsonl's do. Exits 77 (skipped) without the venv or TensorBoard.
set -uo pipefail
bin="$1"
venv="${SINGULARITY_INTEROP_VENV:-$HOME/.cache/singularity/interop-venv}"
if [[ ! -x $venv/bin/python ]]; then
  echo "SKIP: no Python venv at $venv (scripts/setup makes it; or set SINGULARITY_INTEROP_VENV)"
  exit 77
fi
if ! "$venv/bin/python" -c 'from tensorboard.backend.event_processing import event_accumulator' \
    2>/dev/null; then
  echo "SKIP: $venv/bin/python cannot import tensorboard (pip install tensorboard there)"
  exit 77
fi
source "$(dirname "$0")/run_lib.sh"

# Reads <run>/tb with TensorBoard and compares it with <run>/metrics.jsonl; prints what differs.
cat > compare.py <<'PY'
import glob, json, math, os, struct, sys
from tensorboard.backend.event_processing import event_accumulator, event_file_loader

run, want_files = sys.argv[1], int(sys.argv[2])
f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
problems = []
files = sorted(glob.glob(os.path.join(run, "tb", "events.out.tfevents.*")))
if len(files) != want_files:
    problems.append(f"expected {want_files} event files, found {files}")
for path in files:
    events = list(event_file_loader.EventFileLoader(path).Load())
    if not events or events[0].file_version != "brain.Event:2":
        problems.append(f"{path}: the first record is not file_version brain.Event:2")
    if any(e.wall_time < 1.6e9 for e in events):
        problems.append(f"{path}: an event without a wall time")

acc = event_accumulator.EventAccumulator(os.path.join(run, "tb"), size_guidance={"scalars": 0})
acc.Reload()
tb = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
want = {}
for line in open(os.path.join(run, "metrics.jsonl")):
    record = json.loads(line)
    for key, value in record.items():
        if key == "step":
            continue
        value = float("nan") if value is None else float(value)
        want.setdefault(key, []).append((record["step"], value))
if sorted(tb) != sorted(want):
    problems.append(f"tags {sorted(tb)} != metrics.jsonl keys {sorted(want)}")
values = 0
for key, expected in want.items():
    got = tb.get(key, [])
    if [s for s, _ in got] != [s for s, _ in expected]:
        problems.append(f"{key}: steps {[s for s, _ in got]} != {[s for s, _ in expected]}")
        continue
    for (step, g), (_, w) in zip(got, expected):
        values += 1
        if not (g == f32(w) or (math.isnan(g) and math.isnan(w))):
            problems.append(f"{key} at step {step}: TensorBoard {g!r} != metrics.jsonl {w!r}")
for p in problems[:20]:
    print("  " + p)
print(f"{values} values in {len(tb)} tags compared")
sys.exit(1 if problems else 0)
PY

set_tiny=(--set model.n_layer=1 --set model.n_head=2 --set model.n_embd=32 --set model.context=32
          --set train.global_batch=8 --set train.micro_batch=4 --set devices.processes=1
          --set parallel.data=1 --set data.synthetic_train_tokens=16384
          --set data.synthetic_val_tokens=4096 --set eval.every=3 --set eval.steps=2
          --set checkpoint.every=3 --set checkpoint.keep=0 --set checkpoint.resume=auto
          --set log.dir=runs/tb --set log.tensorboard=true)

check
"$bin" train "${set_tiny[@]}" --set train.steps=6 > first.log 2>&1 ||
  fail "the tiny job failed: $(tail -5 first.log)"
check
out=$("$venv/bin/python" compare.py runs/tb 1 2>/dev/null) || fail "fresh run: $out"
echo "fresh run: ${out##*$'\n'}"

# Lose the last checkpoint: the run resumes at step 3 and writes steps 4-6 again, with new step
# times, into a new event file; TensorBoard must show the new values only.
sleep 1  # a new second, so the file name differs by its time stamp, as in real use
rm -rf runs/tb/checkpoints/step_00000006
cp runs/tb/metrics.jsonl first-metrics.jsonl
check
"$bin" train "${set_tiny[@]}" --set train.steps=6 > resumed.log 2>&1 ||
  fail "the resumed job failed: $(tail -5 resumed.log)"
check
grep -q 'resum' resumed.log || fail "the second run did not resume: $(head -5 resumed.log)"
check
out=$("$venv/bin/python" compare.py runs/tb 2 2>/dev/null) || fail "resumed run: $out"
echo "resumed run: ${out##*$'\n'}"

# log.tensorboard off (the default): no tb directory.
check
"$bin" train "${set_tiny[@]}" --set train.steps=1 --set log.dir=runs/plain \
  --set log.tensorboard=false > plain.log 2>&1 || fail "the plain job failed: $(tail -5 plain.log)"
check
[[ -f runs/plain/metrics.jsonl && ! -e runs/plain/tb ]] || fail "log.tensorboard false wrote runs/plain/tb"

finish
