#!/usr/bin/python3
"""The table of scripts/bench/resnet-cpu, from what it left in its work directory:

  round-<k>/torch-<depth>-<python>-<mode>-<layout>.json   resnet_torch.py's result (last line)
  round-<k>/run<depth>/metrics.jsonl                      Singularity's training log
  round-<k>/trace<depth>.tsv                              its per-call op trace (optional)

usage: resnet_cpu_report.py WORK WARMUP "DEPTH:BATCH ..."

For each depth and round: every PyTorch peer, Singularity (images/s and step ms: medians over the
steps after WARMUP; peak resident memory) and Singularity's ratio to the round's fastest PyTorch.
With more than one round, each side's median over the rounds and the median of the per-round
ratios, the figure to quote (the rounds interleave the peers). Then, from the last round's op
trace, where one Singularity step goes: each op's calls and ms per step (medians over the timed
steps), its share, and the gap between the ops' sum and the measured step.
"""
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_cpu_report import read_trace, round_dirs, split_steps  # noqa: E402  (same layout)


def torch_rows(round_dir, depth):
    rows = []
    for path in sorted(glob.glob(os.path.join(round_dir, f"torch-{depth}-*.json"))):
        text = open(path).read().strip()
        if not text:
            continue
        r = json.loads(text)
        where = "Debian" if f"-{depth}-usr-" in os.path.basename(path) else "PyPI"
        layout = "channels-last" if r["channels_last"] else "NCHW"
        mode = ", torch.compile" if r.get("compile") else ""
        rows.append((f"PyTorch {r['torch']} ({where}){mode}, {layout}", r["images_per_s"],
                     r["step_ms"], r["peak_rss_bytes"]))
    return rows


def ours(round_dir, depth, warmup):
    path = os.path.join(round_dir, f"run{depth}", "metrics.jsonl")
    steps = [json.loads(line) for line in open(path) if line.strip()]
    steps = [s for s in steps if "images_per_s" in s][warmup:]
    if not steps:
        sys.exit(f"resnet-cpu: {path} has no timed steps (after {warmup} warm-up steps)")
    return ("singularity", statistics.median(s["images_per_s"] for s in steps),
            statistics.median(s["step_ms"] for s in steps),
            max(s["peak_mem_bytes"] for s in steps))


def print_summary(depth, batch, per_round):
    """Each side's median over the rounds and the median of the per-round ratios."""
    print(f"ResNet-{depth}, batch {batch}, over {len(per_round)} rounds "
          "(median images/s; per-round values in order)")
    labels = []
    for rows, _ in per_round:
        labels += [r[0] for r in rows if r[0] not in labels]
    medians = {}
    for label in labels + ["singularity"]:
        values = ([ips for _, ips in per_round] if label == "singularity" else
                  [r[1] for rows, _ in per_round for r in rows if r[0] == label])
        each = ", ".join(f"{v:.2f}" for v in values)
        medians[label] = statistics.median(values)
        print(f"  {label:58s} {medians[label]:9.2f}  ({each})")
    ratios = [ips / max(r[1] for r in rows) for rows, ips in per_round if rows]
    if ratios:
        each = ", ".join(f"{r:.2f}x" for r in ratios)
        print(f"  singularity / fastest PyTorch of the same round: median "
              f"{statistics.median(ratios):.2f}x ({each})")
        # A round's fastest is the best of several noisy peers, which favours PyTorch; the
        # peers' medians first, then the fastest of those, does not.
        ours = medians.pop("singularity")
        best = max(medians, key=medians.get)
        print(f"  singularity's median / the fastest PyTorch median: {ours / medians[best]:.2f}x ({best})")


def print_breakdown(round_dir, depth, warmup):
    path = os.path.join(round_dir, f"trace{depth}.tsv")
    if not os.path.exists(path):
        return
    steps = split_steps(read_trace(path), first_ops=("nchw_to_nhwc",))[warmup:]
    metrics = [json.loads(line) for line in open(os.path.join(round_dir, f"run{depth}", "metrics.jsonl"))
               if line.strip()]
    measured = [s["step_ms"] / 1e3 for s in metrics if "images_per_s" in s][warmup:]
    if not steps or len(steps) != len(measured):
        print(f"  per-op breakdown: n/a ({len(steps)} traced training steps, {len(measured)} logged)")
        return
    per_step = []
    for step in steps:
        rows = {}
        for name, _, seconds in step:
            calls, total = rows.get(name, (0, 0.0))
            rows[name] = (calls + 1, total + seconds)
        per_step.append(rows)
    names = {name for rows in per_step for name in rows}
    med_step = statistics.median(measured)
    table = sorted(((statistics.median(r.get(n, (0, 0.0))[1] for r in per_step),
                     statistics.median(r.get(n, (0, 0.0))[0] for r in per_step), n) for n in names),
                   reverse=True)
    print(f"  Where one singularity step goes (op trace of the last round, medians over its "
          f"{len(steps)} timed steps):")
    print(f"    {'op':36s} {'calls':>5s} {'ms/step':>8s} {'share':>6s}")
    for seconds, calls, name in table:
        print(f"    {name:36s} {calls:5.0f} {seconds * 1e3:8.1f} {seconds / med_step:6.1%}")
    sums = [sum(t for _, t in r.values()) for r in per_step]
    gap = statistics.median(m - s for m, s in zip(measured, sums))
    print(f"    {'sum of the ops':36s} {'':5s} {statistics.median(sums) * 1e3:8.1f}")
    print(f"    {'measured step':36s} {'':5s} {med_step * 1e3:8.1f}")
    print(f"    {'gap (step - ops)':36s} {'':5s} {gap * 1e3:8.1f} {gap / med_step:6.1%}  "
          "(untimed: data, trainer)")


def main():
    work, warmup = sys.argv[1], int(sys.argv[2])
    runs = [item.split(":") for item in sys.argv[3].split()]  # depth, batch
    dirs = round_dirs(work)
    print(f"{'':60s} {'images/s':>9s} {'step ms':>9s} {'peak MiB':>9s}")
    for depth, batch in runs:
        per_round = []  # (torch rows, our row)
        for k, rd in enumerate(dirs, 1):
            rows = torch_rows(rd, depth)
            name, ips, ms, mem = ours(rd, depth, warmup)
            where = f", round {k} of {len(dirs)}" if len(dirs) > 1 else ""
            print(f"ResNet-{depth}, batch {batch}{where}")
            for label, t_ips, t_ms, t_mem in rows:
                print(f"  {label:58s} {t_ips:9.2f} {t_ms:9.0f} {t_mem / 2**20:9.0f}")
            print(f"  {name:58s} {ips:9.2f} {ms:9.0f} {mem / 2**20:9.0f}")
            if rows:
                best = max(rows, key=lambda r: r[1])
                print(f"  singularity / fastest PyTorch ({best[0]}): {ips / best[1]:.2f}x")
            per_round.append((rows, ips))
        if len(dirs) > 1:
            print_summary(depth, batch, per_round)
        print_breakdown(dirs[-1], depth, warmup)


if __name__ == "__main__":
    main()
