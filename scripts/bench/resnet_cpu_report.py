#!/usr/bin/python3
"""The table of scripts/bench/resnet-cpu, from what it left in its work directory (one per
precision: <work>/fp32, <work>/bf16):

  round-<k>/torch-<depth>-<python>-<mode>-<layout>.json   resnet_torch.py's result (last line)
  round-<k>/run<depth>/metrics.jsonl                      Singularity's training log
  round-<k>/trace<depth>.tsv                              its per-call op trace (optional)

usage: resnet_cpu_report.py WORK WARMUP "DEPTH:BATCH ..." [--precision bf16 [--fp32-work DIR]]

For each depth and round: every PyTorch peer, Singularity (images/s and step ms: medians over the
steps after WARMUP; peak resident memory) and Singularity's ratio to the round's fastest PyTorch.
With more than one round, each side's median over the rounds and the median of the per-round
ratios, the figure to quote (the rounds interleave the peers). Then, from the last round's op
trace, where one Singularity step goes: each op's calls and ms per step (medians over the timed
steps), its share, and the gap between the ops' sum and the measured step.

--precision bf16 labels Singularity's row "singularity, bf16" (its peers are the bf16 autocast
ones; Debian's PyTorch is fp32 only). --fp32-work DIR adds, for each depth, bf16 Singularity
against the fastest PyTorch of either precision in the same round (DIR's round <k> beside this
one's) and against fp32 Singularity.
"""
import argparse
import glob
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
W = 58  # the label column's width (main widens it to the longest label)
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
        if r.get("bf16"):
            mode += ", bf16 autocast"
        rows.append((f"PyTorch {r['torch']} ({where}){mode}, {layout}", r["images_per_s"],
                     r["step_ms"], r["peak_rss_bytes"]))
    return rows


def ours(round_dir, depth, warmup, name="singularity"):
    path = os.path.join(round_dir, f"run{depth}", "metrics.jsonl")
    steps = [json.loads(line) for line in open(path) if line.strip()]
    steps = [s for s in steps if "images_per_s" in s][warmup:]
    if not steps:
        sys.exit(f"resnet-cpu: {path} has no timed steps (after {warmup} warm-up steps)")
    return (name, statistics.median(s["images_per_s"] for s in steps),
            statistics.median(s["step_ms"] for s in steps),
            max(s["peak_mem_bytes"] for s in steps))


def print_summary(depth, batch, per_round, name="singularity"):
    """Each side's median over the rounds and the median of the per-round ratios."""
    print(f"ResNet-{depth}, batch {batch}, over {len(per_round)} rounds "
          "(median images/s; per-round values in order)")
    labels = []
    for rows, _ in per_round:
        labels += [r[0] for r in rows if r[0] not in labels]
    medians = {}
    for label in labels + [name]:
        values = ([ips for _, ips in per_round] if label == name else
                  [r[1] for rows, _ in per_round for r in rows if r[0] == label])
        each = ", ".join(f"{v:.2f}" for v in values)
        medians[label] = statistics.median(values)
        print(f"  {label:{W}s} {medians[label]:9.2f}  ({each})")
    ratios = [ips / max(r[1] for r in rows) for rows, ips in per_round if rows]
    if ratios:
        each = ", ".join(f"{r:.2f}x" for r in ratios)
        print(f"  singularity / fastest PyTorch of the same round: median "
              f"{statistics.median(ratios):.2f}x ({each})")
        # A round's fastest is the best of several noisy peers, which favours PyTorch; the
        # peers' medians first, then the fastest of those, does not.
        ours = medians.pop(name)
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


def print_cross_precision(depth, per_round, fp32_dirs, warmup, precision):
    """bf16 Singularity (per_round: this precision's (torch rows, images/s) per round) against the
    fastest PyTorch of either precision in the same round, and against fp32 Singularity."""
    print(f"  {precision} against either precision (the round's PyTorch peers in fp32 and in "
          f"{precision}; singularity in fp32):")
    vs_peers, vs_ours, peer_values, ours_values = [], [], {}, []
    for k, (rows, ips) in enumerate(per_round):
        peers = [(r[0], r[1]) for r in rows]
        fp32_ips = None
        if k < len(fp32_dirs):
            peers += [(r[0] + " [fp32]", r[1]) for r in torch_rows(fp32_dirs[k], depth)]
            if os.path.exists(os.path.join(fp32_dirs[k], f"run{depth}", "metrics.jsonl")):
                fp32_ips = ours(fp32_dirs[k], depth, warmup)[1]
        for label, value in peers:
            peer_values.setdefault(label, []).append(value)
        ours_values.append(ips)
        parts = []
        if peers:
            best = max(peers, key=lambda p: p[1])
            vs_peers.append(ips / best[1])
            parts.append(f"singularity {precision} / fastest PyTorch of either precision "
                         f"{ips / best[1]:.2f}x ({best[0]})")
        if fp32_ips:
            vs_ours.append(ips / fp32_ips)
            parts.append(f"singularity {precision} / singularity fp32 {ips / fp32_ips:.2f}x")
        where = f"round {k + 1}: " if len(per_round) > 1 else ""
        print("    " + where + ("; ".join(parts) if parts else "n/a (no fp32 run, no peer)"))
    if len(per_round) > 1:
        if vs_peers:
            each = ", ".join(f"{r:.2f}x" for r in vs_peers)
            print(f"    singularity {precision} / fastest PyTorch of either precision of the same "
                  f"round: median {statistics.median(vs_peers):.2f}x ({each})")
            medians = {label: statistics.median(v) for label, v in peer_values.items()}
            best = max(medians, key=medians.get)
            print(f"    singularity {precision}'s median / the fastest PyTorch median of either "
                  f"precision: {statistics.median(ours_values) / medians[best]:.2f}x ({best})")
        if vs_ours:
            each = ", ".join(f"{r:.2f}x" for r in vs_ours)
            print(f"    singularity {precision} / singularity fp32 of the same round: "
                  f"median {statistics.median(vs_ours):.2f}x ({each})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work")
    ap.add_argument("warmup", type=int)
    ap.add_argument("runs", help='"DEPTH:BATCH ..."')
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--fp32-work", metavar="DIR",
                    help="with --precision bf16: the fp32 work directory of the same rounds")
    a = ap.parse_args()
    if a.fp32_work and a.precision == "fp32":
        ap.error("--fp32-work goes with --precision bf16")
    work, warmup = a.work, a.warmup
    runs = [item.split(":") for item in a.runs.split()]  # depth, batch
    dirs = round_dirs(work)
    name = "singularity" if a.precision == "fp32" else f"singularity, {a.precision}"
    if a.precision != "fp32":
        print(f"{a.precision}: singularity with train.precision={a.precision}, PyTorch under "
              "torch.autocast('cpu', dtype=torch.bfloat16) (SGD in fp32); Debian's PyTorch 1.13 "
              "is the fp32 baseline only (skipped)")
    global W  # the label column: 58 wide, or the longest label's width
    W = max([58] + [len(r[0]) for rd in dirs for depth, _ in runs for r in torch_rows(rd, depth)])
    print(f"{'':{W + 2}s} {'images/s':>9s} {'step ms':>9s} {'peak MiB':>9s}")
    for depth, batch in runs:
        per_round = []  # (torch rows, our row)
        for k, rd in enumerate(dirs, 1):
            rows = torch_rows(rd, depth)
            name, ips, ms, mem = ours(rd, depth, warmup, name)
            where = f", round {k} of {len(dirs)}" if len(dirs) > 1 else ""
            print(f"ResNet-{depth}, batch {batch}{where}")
            for label, t_ips, t_ms, t_mem in rows:
                print(f"  {label:{W}s} {t_ips:9.2f} {t_ms:9.0f} {t_mem / 2**20:9.0f}")
            print(f"  {name:{W}s} {ips:9.2f} {ms:9.0f} {mem / 2**20:9.0f}")
            if rows:
                best = max(rows, key=lambda r: r[1])
                ours_name = "singularity" if a.precision == "fp32" else f"singularity {a.precision}"
                print(f"  {ours_name} / fastest PyTorch ({best[0]}): {ips / best[1]:.2f}x")
            per_round.append((rows, ips))
        if len(dirs) > 1:
            print_summary(depth, batch, per_round, name)
        if a.fp32_work:
            print_cross_precision(depth, per_round, round_dirs(a.fp32_work), warmup, a.precision)
        print_breakdown(dirs[-1], depth, warmup)


if __name__ == "__main__":
    main()
