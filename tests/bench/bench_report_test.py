#!/usr/bin/python3
"""The benchmark reports (scripts/bench/gpt_cpu_report.py, resnet_cpu_report.py) on made-up work
directories: each round's ratio to its own fastest PyTorch, the medians over the rounds, a peer
that failed in one round, and the one-round layout without round-<k> directories."""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.environ.get("SINGULARITY_SOURCE_ROOT",
                      os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
failures = []


def check(condition, what, output):
    if not condition:
        failures.append(what)
        print(f"FAIL: {what}\n--- output ---\n{output}\n--------------", file=sys.stderr)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def gpt_round(d, debian2, compiled, ours, peak, sustained=None):
    write(os.path.join(d, "peer-debian2.label"), "PyTorch (Debian), eager, 2 threads")
    write(os.path.join(d, "peer-debian2.json"),
          json.dumps({"torch": "1.13", "variant": "eager", "tokens_per_s": debian2, "step_ms": 1.0}))
    write(os.path.join(d, "peer-pypi-compiled.label"), "PyTorch (PyPI), torch.compile, 2 threads")
    if compiled is None:
        write(os.path.join(d, "peer-pypi-compiled.status"), "failed: RuntimeError: no compiler")
    else:
        write(os.path.join(d, "peer-pypi-compiled.json"),
              json.dumps({"torch": "2.5", "variant": "compile", "tokens_per_s": compiled,
                          "step_ms": 1.0, "first_step_s": 30.0}))
    # 5 warm-up steps (left out), then three timed ones whose median is `ours`.
    steps = [1.0] * 5 + [ours - 10, ours, ours + 50]
    write(os.path.join(d, "metrics.jsonl"), "".join(
        json.dumps({"step": i + 1, "step_ms": 1000.0, "tokens_per_s": t}) + "\n"
        for i, t in enumerate(steps)))
    write(os.path.join(d, "peak.txt"), str(peak))
    if sustained is not None:
        write(os.path.join(d, "sustained.txt"), str(sustained))


def run(args):
    r = subprocess.run([sys.executable] + args, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


gpt_args = ["--layers", "2", "--width", "64", "--heads", "2", "--context", "32", "--batch", "1",
            "--vocab", "1000", "--skip", "5"]
gpt_report = os.path.join(ROOT, "scripts", "bench", "gpt_cpu_report.py")
with tempfile.TemporaryDirectory() as work:
    # Round ratios: 600/400 = 1.50, 500/250 = 2.00 (compiled failed: Debian is fastest), 450/500 = 0.90.
    gpt_round(os.path.join(work, "round-1"), 300.0, 400.0, 600.0, 100.0, 50.0)
    gpt_round(os.path.join(work, "round-2"), 250.0, None, 500.0, 100.0, 50.0)
    gpt_round(os.path.join(work, "round-10"), 200.0, 500.0, 450.0, 100.0, 50.0)
    rc, out = run([gpt_report, work] + gpt_args)
    check(rc == 0, "gpt report exits 0", out)
    check("median 1.50x (1.50x, 2.00x, 0.90x)" in out,
          "gpt: per-round ratios in round order (round-10 last) and their median", out)
    check("Round 3 of 3" in out and "Over 3 rounds" in out, "gpt: three rounds reported", out)
    check("failed: RuntimeError: no compiler" in out, "gpt: the failed peer's reason is shown", out)
    check("(400.0, 500.0)" in out, "gpt: a peer's median covers only the rounds it ran", out)
    check("(600.0, 500.0, 450.0)" in out, "gpt: singularity's per-round medians", out)
    # Peer medians: Debian 250, compiled 450 (two rounds): 500 / 450.
    check("the fastest PyTorch median:  1.11x (PyTorch 2.5 (PyPI), torch.compile" in out,
          "gpt: singularity's median over the fastest peer's median", out)
    check("no op trace" in out and "Per-op breakdown from round 3" in out,
          "gpt: the breakdown comes from the last round", out)
    # The sustained rate is half the peak in every round: twice the fraction.
    peak_median = re.search(r"SGEMM peak: +median ([0-9.]+)%", out)
    sustained_median = re.search(r"sustained SGEMM rate: +median ([0-9.]+)%", out)
    check(peak_median and sustained_median and
          abs(float(sustained_median.group(1)) - 2 * float(peak_median.group(1))) < 0.2,
          "gpt: the fraction of the sustained SGEMM rate beside the peak's", out)

with tempfile.TemporaryDirectory() as work:
    gpt_round(work, 300.0, 400.0, 600.0, 1000.0)  # the one-round layout
    rc, out = run([gpt_report, work] + gpt_args)
    check(rc == 0 and "singularity / fastest PyTorch:      1.50x" in out,
          "gpt: one round without round directories", out)
    check("Over " not in out, "gpt: no summary for one round", out)
    check("sustained" not in out, "gpt: no sustained fraction where none was measured", out)


def resnet_trace(d, depth, steps):
    """An op trace: an evaluation pass (no optimizer update), then `steps` training steps of
    1.61 s of ops each, the first two 10x slower (the warm-up the report leaves out)."""
    lines, t = [], 0.0
    def call(name, seconds):
        nonlocal t
        lines.append(f"{name}\t{t:.6f}\t{seconds:.6f}\n")
        t += seconds
    call("nchw_to_nhwc", 0.01)
    call("conv2d_forward", 0.5)
    for k in range(steps):
        slow = 10.0 if k < 2 else 1.0
        call("nchw_to_nhwc", 0.01 * slow)
        call("conv2d_forward", 0.5 * slow)
        call("conv2d_backward", 0.4 * slow)
        call("conv2d_backward", 0.6 * slow)
        call("sgd_update", 0.1 * slow)
    write(os.path.join(d, f"trace{depth}.tsv"), "".join(lines))


def resnet_round(d, depth, peers, ours):
    for tag, ips in peers.items():
        write(os.path.join(d, f"torch-{depth}-{tag}.json"),
              json.dumps({"torch": "2.5", "images_per_s": ips, "step_ms": 1.0,
                          "peak_rss_bytes": 2 ** 30, "channels_last": "channels_last" in tag,
                          "compile": "-compile-" in tag}) + "\n")
    steps = [0.1, 0.1] + [ours - 0.5, ours, ours + 0.5]
    write(os.path.join(d, f"run{depth}", "metrics.jsonl"), "".join(
        json.dumps({"step": i + 1, "images_per_s": v, "step_ms": 1700.0, "peak_mem_bytes": 2 ** 29,
                    "batch": 8}) + "\n" for i, v in enumerate(steps)) + '{"step": 5, "val_loss": 1}\n')


resnet_report = os.path.join(ROOT, "scripts", "bench", "resnet_cpu_report.py")
with tempfile.TemporaryDirectory() as work:
    # Ratios 3.3/3.0 = 1.10, 3.6/3.0 = 1.20, 3.9/3.0 = 1.30.
    resnet_round(os.path.join(work, "round-1"), 50,
                 {"usr-eager-nchw": 3.0, "torch-venv-compile-channels_last": 2.0}, 3.3)
    resnet_round(os.path.join(work, "round-2"), 50,
                 {"usr-eager-nchw": 2.0, "torch-venv-compile-channels_last": 3.0}, 3.6)
    resnet_round(os.path.join(work, "round-3"), 50,
                 {"usr-eager-nchw": 3.0, "torch-venv-compile-channels_last": 1.0}, 3.9)
    resnet_trace(os.path.join(work, "round-3"), 50, 5)
    rc, out = run([resnet_report, work, "2", "50:8"])
    check(rc == 0, "resnet report exits 0", out)
    check("median 1.20x (1.10x, 1.20x, 1.30x)" in out,
          "resnet: per-round ratios to each round's fastest and their median", out)
    check("(PyPI), torch.compile, channels-last" in out and "(Debian), NCHW" in out,
          "resnet: peers named by origin, mode and layout", out)
    check("3.60  (3.30, 3.60, 3.90)" in out, "resnet: singularity's median over rounds", out)
    # Peer medians: Debian 3.0, compiled 2.0: 3.6 / 3.0.
    check("the fastest PyTorch median: 1.20x (PyTorch 2.5 (Debian), NCHW)" in out,
          "resnet: singularity's median over the fastest peer's median", out)
    check("ResNet-50, batch 8, round 3 of 3" in out and "ResNet-50, batch 8, over 3 rounds" in out,
          "resnet: depth, batch and round in the headings", out)
    lines = out.splitlines()
    def row(name):
        return next((line.split() for line in lines if line.strip().startswith(name + " ")), [])
    check(row("conv2d_backward")[1:4] == ["2", "1000.0", "58.8%"],
          "resnet breakdown: calls and ms per step summed per op, share of the measured step", out)
    check(row("sum of the ops")[-1:] == ["1610.0"] and row("measured step")[-1:] == ["1700.0"],
          "resnet breakdown: the warm-up and the evaluation pass are left out", out)
    check(row("gap (step - ops)")[4:6] == ["90.0", "5.3%"], "resnet breakdown: the gap", out)

with tempfile.TemporaryDirectory() as work:
    resnet_round(work, 18, {"usr-eager-nchw": 4.0}, 5.0)
    rc, out = run([resnet_report, work, "2", "18:16"])
    check(rc == 0 and "1.25x" in out and "over " not in out and "ResNet-18, batch 16\n" in out,
          "resnet: one round without round directories", out)

if failures:
    sys.exit(f"{len(failures)} check(s) failed: " + "; ".join(failures))
print("bench reports: all checks passed")
