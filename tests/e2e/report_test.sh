#!/usr/bin/env bash
# `singularity report`: two tiny runs of different lengths give one self-contained HTML page
# (no script, nothing fetched) with, in each plot, one polyline per run holding exactly as many
# points as the run's metrics.jsonl has values of the metric, and a table row per run; a sweep's
# directory expands to its points; a directory without metrics.jsonl exits 2 and an unwritable
# output exits 1, each with one error line. Then headless Chromium draws the page and the
# screenshot must not be blank (that part is skipped, with the reason, where Chromium cannot
# run).
set -uo pipefail
bin="$1"
man_page="${2:-}/man/singularity.1"
source "$(dirname "$0")/run_lib.sh"

set_tiny=(--set model.n_layer=1 --set model.n_head=2 --set model.n_embd=32 --set model.context=32
          --set train.global_batch=8 --set train.micro_batch=4 --set devices.processes=1
          --set parallel.data=1 --set data.synthetic_train_tokens=16384
          --set data.synthetic_val_tokens=4096 --set eval.every=4 --set eval.steps=2
          --set checkpoint.every=0 --set checkpoint.resume=never)
start=$(date +%s)
check
"$bin" train "${set_tiny[@]}" --set train.steps=8 --set log.dir=runs/a > a.log 2>&1 ||
  fail "run a failed: $(tail -5 a.log)"
check
"$bin" train "${set_tiny[@]}" --set train.steps=12 --set optim.lr=1e-3 --set log.dir=runs/b \
  > b.log 2>&1 || fail "run b failed: $(tail -5 b.log)"
echo "two tiny runs: $(( $(date +%s) - start )) s"

# Checks the page against the runs' metrics.jsonl: prints what is wrong, exits 1 if anything.
cat > check_html.py <<'PY'
import json, re, sys
page, runs = sys.argv[1], sys.argv[2:]
html = open(page, encoding="utf-8").read()
problems = []
if re.search(r"<script", html, re.I): problems.append("the page has a <script")
if re.search(r"http", html, re.I): problems.append("the page refers to http")
if re.search(r"""(src|href)\s*=""", html, re.I): problems.append("the page loads something")
counts = []
for run in runs:
    count = {}
    for line in open(run + "/metrics.jsonl"):
        for key in json.loads(line):
            count[key] = count.get(key, 0) + 1
    counts.append(count)
figures = dict(re.findall(r'<figure data-plot="([^"]+)">(.*?)</figure>', html, re.S))
want_plots = {"loss": ["loss", "val_loss"], "lr": ["lr"], "grad_norm": ["grad_norm"],
              "throughput": ["tokens_per_s"], "mfu": ["mfu"], "memory": ["peak_mem_bytes"]}
for plot, metrics in want_plots.items():
    if plot not in figures:
        problems.append(f"no {plot} plot"); continue
    lines = re.findall(r'<polyline [^>]*data-run="(\d+)" data-metric="([^"]+)"[^>]*points="([^"]*)"',
                       figures[plot])
    want = sorted((str(r), m) for r in range(len(runs)) for m in metrics)
    if sorted((r, m) for r, m, _ in lines) != want:
        problems.append(f"{plot}: polylines {[(r, m) for r, m, _ in lines]}, want {want}")
    for r, m, points in lines:
        n = len(points.split())
        if n != counts[int(r)].get(m, -1):
            problems.append(f"{plot}: run {r}'s {m} has {n} points, metrics.jsonl {counts[int(r)].get(m)}")
    if len(re.findall(r'class="tick"', figures[plot])) < 4:
        problems.append(f"{plot}: fewer than 4 tick labels")
rows = re.findall(r'<tr data-run="(\d+)"><td>.*?</span>([^<]*)</td><td>(\d+)</td>', html)
if [(int(r), name) for r, name, _ in rows] != list(enumerate(runs)):
    problems.append(f"table rows {rows}, want one per run {runs}")
for r, name, steps in rows:
    want = max(json.loads(l)["step"] for l in open(name + "/metrics.jsonl"))
    if int(steps) != want:
        problems.append(f"row {r}: steps {steps}, want {want}")
for p in problems:
    print("  " + p)
print(f"{len(figures)} plots, {len(rows)} rows")
sys.exit(1 if problems else 0)
PY

mkdir -p out
expect 0 '^out/report\.html$' -- "$bin" report runs/a runs/b -o out/report.html
check
out=$(python3 check_html.py out/report.html runs/a runs/b) || fail "two runs: $out"
echo "two runs: ${out##*$'\n'}"

# A sweep's directory stands for its points, in point order (10 after 2).
mkdir -p runs/sweep
cp -r runs/b runs/sweep/10-lr=1e-3
cp -r runs/a runs/sweep/2-lr=3e-3
mkdir -p runs/sweep/11-pending  # a point not started: no metrics.jsonl, left out
echo "index,status" > runs/sweep/summary.csv
expect 0 '^report\.html$' -- "$bin" report runs/sweep/
check
out=$(python3 check_html.py report.html runs/sweep/2-lr=3e-3 runs/sweep/10-lr=1e-3) ||
  fail "sweep: $out"
echo "sweep: ${out##*$'\n'}"

# Errors: one line each; a directory that is no run exits 2, an unwritable output 1.
mkdir -p empty
expect 2 '^error: empty: no metrics\.jsonl' -- "$bin" report empty
expect 2 'nowhere' -- "$bin" report nowhere
expect 1 '^error: missing/report\.html: cannot write' -- "$bin" report runs/a -o missing/report.html
check
n=$("$bin" report runs/a -o missing/report.html 2>&1 | wc -l)
[[ $n -eq 1 ]] || fail "an unwritable output printed $n lines, want 1"

# The man page documents the command and its options.
if [[ -f $man_page ]]; then
  man_text=$(sed -e 's/\\-/-/g' "$man_page")
  check
  grep -qE '^\.B singularity report' <<<"$man_text" || fail "man/singularity.1 has no 'singularity report'"
  for option in $("$bin" report --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
    [[ $option == --help ]] && continue
    check
    grep -qF -- "$option" <<<"$man_text" || fail "man/singularity.1 does not document 'report $option'"
  done
fi

# Headless Chromium draws the page: a 1200x2000 PNG, not blank.
chromium_bin=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chromium_bin ]]; then
  echo "SKIP (screenshot): no chromium on PATH (scripts/setup installs Debian's chromium)"
elif ! /usr/bin/python3 -c 'from PIL import Image' 2>/dev/null; then
  echo "SKIP (screenshot): /usr/bin/python3 has no PIL (Debian's python3-pil)"
else
  timeout 120 "$chromium_bin" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$work/chromium-profile" --screenshot="$work/shot.png" \
    --window-size=1200,2000 "file://$work/out/report.html" > chromium.log 2>&1
  rc=$?
  if [[ ! -s shot.png ]]; then
    echo "SKIP (screenshot): chromium cannot run here (exit $rc): $(grep -v '^$' chromium.log | tail -2)"
  else
    check
    out=$(/usr/bin/python3 - shot.png <<'PY'
import sys
from PIL import Image
image = Image.open(sys.argv[1])
if image.format != "PNG" or image.size != (1200, 2000):
    print(f"a {image.format} of {image.size}, want a PNG of (1200, 2000)"); sys.exit(1)
pixels = image.convert("RGB").getdata()
ink = sum(1 for p in pixels if p != (255, 255, 255))
coloured = sum(1 for r, g, b in pixels if max(r, g, b) - min(r, g, b) > 60)
print(f"{ink} non-white pixels, {coloured} coloured")
sys.exit(0 if ink > 20000 and coloured > 1000 else 1)
PY
)
    rc=$?
    [[ $rc -eq 0 ]] || fail "the screenshot looks blank: $out"
    echo "screenshot: $out"
  fi
fi

finish
