#!/usr/bin/python3
"""The tables of scripts/bench/gpt-cpu, from what it left in its work directory (one per
precision: <work>/fp32, <work>/bf16): one directory round-<k> per round (or the files directly in
the work directory, read as one round), each with

  peer-<id>.label, and peer-<id>.json (gpt_torch.py's result) or peer-<id>.status (why not)
  metrics.jsonl   Singularity's training log (step_ms, tokens_per_s, mfu per step)
  peak.txt        the SGEMM peak in GFLOP/s, or for --precision bf16 the bf16 products' peak
                  (bf16_peak_gflops); may be empty
  sustained.txt   the sustained SGEMM rate in GFLOP/s, median call of 3 s (may be empty or absent;
                  fp32 only)
  ops.tsv         Singularity's per-call op trace (SINGULARITY_PROFILE_OPS_TRACE): name, start, s
  load.txt        /proc/loadavg before and after the runs

--precision bf16 names Singularity's row "singularity, bf16, 2 threads" and takes the peak
fraction against the bf16 peak; its peers are the bf16 autocast ones. --fp32-work DIR (with
--precision bf16) adds, per round and over the rounds, bf16 Singularity against the fastest
PyTorch of either precision (DIR's round <k> beside this one's) and against fp32 Singularity.

Prints, for each round, the throughput table (every peer, and its speed as a fraction of the
fastest) and the SGEMM-peak fraction; over the rounds, each peer's median and the medians of
Singularity's ratio to the fastest PyTorch and of its peak fraction (the figures to quote, as
the rounds interleave the peers); and, from the last round, the per-op breakdown of one
Singularity step: for each op (the matmuls split by call site) calls per step, ms per step
(median over the timed steps), share of the step, and GFLOP/s (GEMMs, attention) or GB/s (the
memory-bound ops); then the sum of the ops against the measured step time and the gap between
them (untimed work: zeroing buffers, data loading, the trainer's own bookkeeping, threads waking
between calls).

FLOP and byte counts are computed from the model's shape, not measured:
  matmul   2*N*in*out forward, twice that backward (dinp and dweight); the LM head at the
           padded vocabulary (a multiple of 128), which is what the GEMM computes.
  attention  the full T x T score matrices (4*B*T*T*C forward, 8*B*T*T*C backward), as
           build/bench/kernels_bench counts them; the causal mask makes half of that useful.
  bytes    the least traffic the op can make in fp32: each operand read once, each result
           written once (a += target read and written).
"""
import argparse
import json
import os
import statistics
import sys

PEERS = ["debian1", "debian2", "pypi-eager", "pypi-compiled"]
MATMUL_SITES = ["qkv", "attproj", "fc", "fcproj"]  # forward order within a block


def load_json(path):
    return json.load(open(path)) if os.path.exists(path) else None


def read_text(path):
    return open(path).read().strip() if os.path.exists(path) else ""


def singularity_steps(work):
    path = os.path.join(work, "metrics.jsonl")
    if not os.path.exists(path):
        return None
    steps = []
    for number, line in enumerate(open(path), 1):
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"gpt-cpu: metrics.jsonl line {number}: {e}")
        if "step" in record and "tokens_per_s" in record:
            steps.append(record)
    return steps


def round_dirs(work):
    """The work directory's round-<k> directories in round order, or the work directory itself
    (one round, the layout before rounds)."""
    rounds = sorted((d for d in os.listdir(work) if d.startswith("round-")),
                    key=lambda d: int(d.split("-", 1)[1]))
    return [os.path.join(work, d) for d in rounds] or [work]


def read_trace(path):
    calls = []
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 3:
            calls.append((parts[0], float(parts[1]), float(parts[2])))
    return calls


def split_steps(calls, first_ops=("encoder_forward", "embedding_forward_vocab_range")):
    """The trace cut at each forward pass's first op (one of first_ops); the pieces with an
    optimizer update are training steps (an evaluation pass has none)."""
    segments, current = [], None
    for call in calls:
        if call[0] in first_ops:
            current = []
            segments.append(current)
        if current is not None:
            current.append(call)
    return [s for s in segments if any(c[0] in ("adamw_update", "sgd_update") for c in s)]


def label_calls(step, L):
    """(row name, seconds) for each call of one step, the matmuls named by call site where the
    step has the expected 4 per block + 1 (LM head) of each."""
    fwd = [c for c in step if c[0] == "matmul_forward"]
    bwd = [c for c in step if c[0] == "matmul_backward"]
    split = len(fwd) == 4 * L + 1 and len(bwd) == 4 * L + 1
    i_f = i_b = 0
    out = []
    for name, _, seconds in step:
        row = name
        if split and name == "matmul_forward":
            row = "matmul_forward " + (MATMUL_SITES[i_f % 4] if i_f < 4 * L else "lm_head")
            i_f += 1
        elif split and name == "matmul_backward":
            row = "matmul_backward " + ("lm_head" if i_b == 0 else MATMUL_SITES[3 - (i_b - 1) % 4])
            i_b += 1
        out.append((row, seconds))
    return out


def op_costs(a):
    """Row name -> ("flop" or "byte", count per call) where the shape determines it; the
    per-step totals of ops called per tensor (adamw, gradient norm) as ("flop"/"byte", count,
    True)."""
    B, T, C, L = a.batch, a.context, a.width, a.layers
    Vp = (a.vocab + 127) // 128 * 128
    N = B * T
    NC = N * C
    f = 4  # bytes per float
    params = Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C  # as laid out (padded wte)
    dims = {"qkv": (C, 3 * C), "attproj": (C, C), "fc": (C, 4 * C), "fcproj": (4 * C, C),
            "lm_head": (C, Vp)}
    costs = {}
    for site, (i, o) in dims.items():
        costs["matmul_forward " + site] = ("flop", 2 * N * i * o)
        costs["matmul_backward " + site] = ("flop", 4 * N * i * o)
    costs.update({
        "attention_forward": ("flop", 4 * B * T * T * C),
        "attention_backward": ("flop", 8 * B * T * T * C),
        "encoder_forward": ("byte", f * (2 * NC + T * C) + 4 * N),
        "encoder_backward": ("byte", f * (3 * NC + 2 * T * C) + 4 * N),
        "layernorm_forward": ("byte", f * (2 * NC + 2 * N)),
        "layernorm_backward": ("byte", f * (4 * NC + 2 * N)),
        "residual_forward": ("byte", f * 3 * NC),
        "residual_layernorm_forward": ("byte", f * (4 * NC + 2 * N)),
        "add_bias": ("byte", f * 2 * NC),
        "gelu_forward": ("byte", f * 2 * N * 4 * C),
        "gelu_backward": ("byte", f * 3 * N * 4 * C),
        "crossentropy_forward_backward": ("byte", f * 2 * N * Vp + 4 * N),
        "crossentropy_forward": ("byte", f * 2 * N * Vp + 4 * N),
        "crossentropy_backward": ("byte", f * 2 * N * Vp + 4 * N),
        # Per step, over all the calls (one per parameter tensor or range).
        "adamw_update": ("byte", 28 * params, True),
        "sum_of_squares": ("byte", f * params, True),
        "clip_by_global_norm": ("byte", 2 * f * params, True),
    })
    return costs


def singularity_label(precision):
    return "singularity, 2 threads" if precision == "fp32" else f"singularity, {precision}, 2 threads"


def peer_rows(work):
    """(label, tokens/s or None, step ms, note) for each peer of one round."""
    rows = []
    for peer in PEERS:
        label = read_text(os.path.join(work, f"peer-{peer}.label"))
        if not label:
            continue
        r = load_json(os.path.join(work, f"peer-{peer}.json"))
        if r:
            label = label.replace("PyTorch (", f"PyTorch {r['torch']} (", 1)
            note = ""
            if "compile" in r.get("variant", ""):
                note = f"first step (compiling) {r['first_step_s']:.0f} s"
            rows.append((label, r["tokens_per_s"], r["step_ms"], note))
        else:
            rows.append((label, None, None,
                         read_text(os.path.join(work, f"peer-{peer}.status")) or "no result"))
    return rows


def singularity_tokens_per_s(steps, skip):
    """Median tokens/s and step ms over the timed steps (None where Singularity did not run)."""
    if steps is None:
        return None, None
    timed = steps[skip:]
    if not timed:
        sys.exit(f"gpt-cpu: metrics.jsonl has {len(steps)} step lines; need more than {skip}")
    step_ms = (statistics.median(s["step_ms"] for s in timed)
               if all("step_ms" in s for s in timed) else float("nan"))
    return statistics.median(s["tokens_per_s"] for s in timed), step_ms


def print_peers(work, steps, skip, precision="fp32"):
    rows = peer_rows(work)  # label, tokens/s or None, step ms, note
    singularity, step_ms = singularity_tokens_per_s(steps, skip)
    if singularity is not None:
        rows.append((singularity_label(precision), singularity, step_ms, ""))

    fastest = max((r[1] for r in rows if r[1]), default=None)
    w = max([54] + [len(r[0]) for r in rows])
    print(f"{'':{w}s} {'tokens/s':>9s} {'step ms':>8s} {'vs fastest':>10s}")
    for label, tps, ms, note in rows:
        if tps is None:
            print(f"{label:{w}s} {'-':>9s} {'-':>8s} {'-':>10s}  {note}")
        else:
            ratio = f"{tps / fastest:.2f}x"
            print(f"{label:{w}s} {tps:9.1f} {ms:8.0f} {ratio:>10s}" + (f"  {note}" if note else ""))
    print("(vs fastest: tokens/s as a fraction of the fastest row's; medians over the timed steps)")
    torch_best = max((r[1] for r in rows[:-1] if r[1]), default=None) if singularity else None
    if singularity and torch_best:
        if precision == "fp32":
            print(f"singularity / fastest PyTorch:      {singularity / torch_best:.2f}x")
        else:
            print(f"singularity {precision} / fastest {precision} PyTorch: "
                  f"{singularity / torch_best:.2f}x")
    return singularity, torch_best, rows


def peak_name(precision):
    return "SGEMM peak" if precision == "fp32" else f"{precision} peak"


def peak_fraction(work, singularity, flops_per_token, precision="fp32"):
    """Prints the achieved GFLOP/s; returns the fractions of this round's peak (SGEMM's, or the
    bf16 products' for bf16) and of its sustained SGEMM rate (each None where not measured)."""
    achieved = singularity * flops_per_token
    peak_text = read_text(os.path.join(work, "peak.txt"))
    sustained_text = read_text(os.path.join(work, "sustained.txt"))
    line = f"singularity achieved:              {achieved / 1e9:.1f} GFLOP/s"
    fraction = sustained_fraction = None
    key = "sgemm_peak_gflops" if precision == "fp32" else f"{precision}_peak_gflops"
    if peak_text:
        peak = float(peak_text) * 1e9
        fraction = achieved / peak
        line += f" = {fraction:.1%} of the {peak_name(precision)} {peak / 1e9:.1f} GFLOP/s"
    else:
        line += (f" ({peak_name(precision)} n/a: `singularity info --peak` printed no {key} line)")
    if sustained_text:
        sustained = float(sustained_text) * 1e9
        sustained_fraction = achieved / sustained
        line += f"\n                                   = {sustained_fraction:.1%} of the sustained SGEMM rate {sustained / 1e9:.1f} GFLOP/s (3 s median)"
    print(line)
    return fraction, sustained_fraction


def print_summary(results, precision="fp32"):
    """results: per round (rows, singularity, torch_best, peak fraction, sustained fraction).
    Medians over rounds."""
    print(f"\nOver {len(results)} rounds (each peer's median tokens/s; per-round values in order):")
    labels = []
    for rows, *_ in results:
        for label, *_ in rows:
            if label not in labels:
                labels.append(label)
    per_label = {}
    w = max([52] + [len(label) for label in labels])
    for label in labels:
        values = [r[1] for rows, *_ in results for r in rows if r[0] == label and r[1]]
        per_label[label] = values
        if values:
            each = ", ".join(f"{v:.1f}" for v in values)
            print(f"  {label:{w}s} {statistics.median(values):9.1f}  ({each})")
        else:
            print(f"  {label:{w}s} {'-':>9s}  (no result in any round)")
    ratios = [s / t for _, s, t, *_ in results if s and t]
    if ratios:
        each = ", ".join(f"{r:.2f}x" for r in ratios)
        print(f"singularity / fastest PyTorch of the same round: median {statistics.median(ratios):.2f}x ({each})")
        # The round's fastest is the best of several noisy peers, which favours PyTorch; the
        # peers' medians first, then the fastest of those, does not.
        medians = {label: statistics.median(v) for label, v in per_label.items() if v}
        ours = medians.pop(singularity_label(precision), None)
        if ours and medians:
            best = max(medians, key=medians.get)
            print(f"singularity's median / the fastest PyTorch median:  {ours / medians[best]:.2f}x ({best})")
    fractions = [r[3] for r in results if r[3] is not None]
    if fractions:
        each = ", ".join(f"{f:.1%}" for f in fractions)
        name = f"fraction of the round's {peak_name(precision)}:"
        print(f"{name:48s} median {statistics.median(fractions):.1%} ({each})")
    sustained = [r[4] for r in results if r[4] is not None]
    if sustained:
        each = ", ".join(f"{f:.1%}" for f in sustained)
        print(f"fraction of the round's sustained SGEMM rate:    median {statistics.median(sustained):.1%} ({each})")


def print_breakdown(work, a, steps):
    path = os.path.join(work, "ops.tsv")
    if not os.path.exists(path):
        print("\nper-op breakdown: n/a (no op trace; SINGULARITY_PROFILE_OPS_TRACE wrote nothing)")
        return
    train_steps = split_steps(read_trace(path))
    if len(train_steps) <= a.skip:
        print(f"\nper-op breakdown: n/a (the trace has {len(train_steps)} training steps)")
        return
    paired = steps is not None and len(steps) == len(train_steps)
    timed = list(range(a.skip, len(train_steps)))
    costs = op_costs(a)

    per_step = []  # {row: (calls, seconds)} per timed step
    order = []
    for k in timed:
        rows = {}
        for row, seconds in label_calls(train_steps[k], a.layers):
            calls, total = rows.get(row, (0, 0.0))
            rows[row] = (calls + 1, total + seconds)
            if row not in order:
                order.append(row)
        per_step.append(rows)
    op_sums = [sum(t for _, t in rows.values()) for rows in per_step]
    if paired:
        measured = [steps[k]["step_ms"] / 1e3 for k in timed]
        step_source = "the trainer's step_ms, same steps"
    else:
        # The span from a step's first op to the next step's first op.
        starts = [s[0][1] for s in train_steps]
        measured = [starts[k + 1] - starts[k] for k in timed if k + 1 < len(starts)]
        step_source = "first op to the next step's first op"
    med_step = statistics.median(measured)

    table = []
    for row in order:
        seconds = statistics.median(rows.get(row, (0, 0.0))[1] for rows in per_step)
        calls = statistics.median(rows.get(row, (0, 0.0))[0] for rows in per_step)
        rate = ""
        cost = costs.get(row)
        if cost and seconds > 0:
            count = cost[1] if len(cost) == 3 else cost[1] * calls
            unit = "GFLOP/s" if cost[0] == "flop" else "GB/s"
            rate = f"{count / seconds / 1e9:7.1f} {unit}"
        table.append((seconds, row, calls, rate))
    table.sort(reverse=True)

    print(f"\nWhere one singularity step goes (per-op trace, medians over steps "
          f"{a.skip + 1}-{len(train_steps)}):")
    print(f"{'op':34s} {'calls':>5s} {'ms/step':>8s} {'share':>6s}  rate")
    for seconds, row, calls, rate in table:
        print(f"{row:34s} {calls:5.0f} {seconds * 1e3:8.1f} {seconds / med_step:6.1%}  {rate}")
    med_sum = statistics.median(op_sums)
    if paired:
        gaps = [m - s for m, s in zip(measured, op_sums)]
        med_gap = statistics.median(gaps)
    else:
        med_gap = med_step - med_sum
    print(f"{'sum of the ops':34s} {'':5s} {med_sum * 1e3:8.1f} {med_sum / med_step:6.1%}")
    print(f"{'measured step':34s} {'':5s} {med_step * 1e3:8.1f} {1:6.1%}  ({step_source})")
    print(f"{'gap (step - ops)':34s} {'':5s} {med_gap * 1e3:8.1f} {med_gap / med_step:6.1%}  "
          "(median per step; untimed: data, trainer, thread wake-ups)")
    print("GFLOP/s: matmuls at the padded vocabulary, attention counting the full T x T matrices;"
          " GB/s: least fp32 traffic (each operand read once, each result written once)")
    if a.precision != "fp32":
        print(f"({a.precision} run: the same FLOP and byte counts as fp32; "
              f"train.precision={a.precision} runs the linear layers' products on {a.precision} operands)")


def print_cross_precision(work, fp32_work, a, results):
    """bf16 Singularity (results: this precision's rounds, as main collects them) against the
    fastest PyTorch of either precision in the same round, and against fp32 Singularity."""
    fp32_dirs = round_dirs(fp32_work)
    label = singularity_label(a.precision)
    ours_name = f"singularity {a.precision}"
    print(f"\n{a.precision} against either precision (the round's PyTorch peers in fp32 and in "
          f"{a.precision}; singularity in fp32):")
    vs_peers, vs_ours, peer_values, ours_fp32 = [], [], {}, []
    for k, (rows, singularity, *_) in enumerate(results):
        fp32_rows = peer_rows(fp32_dirs[k]) if k < len(fp32_dirs) else []
        fp32_ours = None
        if k < len(fp32_dirs):
            fp32_ours, _ = singularity_tokens_per_s(singularity_steps(fp32_dirs[k]), a.skip)
        peers = ([(r[0] + " [fp32]", r[1]) for r in fp32_rows if r[1]]
                 + [(r[0], r[1]) for r in rows if r[1] and r[0] != label])
        for name, value in peers:
            peer_values.setdefault(name, []).append(value)
        if fp32_ours:
            ours_fp32.append(fp32_ours)
        parts = []
        if singularity and peers:
            best = max(peers, key=lambda p: p[1])
            vs_peers.append(singularity / best[1])
            parts.append(f"{ours_name} / fastest PyTorch of either precision "
                         f"{singularity / best[1]:.2f}x ({best[0]})")
        if singularity and fp32_ours:
            vs_ours.append(singularity / fp32_ours)
            parts.append(f"{ours_name} / singularity fp32 {singularity / fp32_ours:.2f}x")
        where = f"round {k + 1}: " if len(results) > 1 else ""
        print("  " + where + ("; ".join(parts) if parts else "n/a (no singularity or no peer)"))
    if len(results) > 1:
        if vs_peers:
            each = ", ".join(f"{r:.2f}x" for r in vs_peers)
            print(f"  {ours_name} / fastest PyTorch of either precision of the same round: "
                  f"median {statistics.median(vs_peers):.2f}x ({each})")
            ours = [r[1] for r in results if r[1]]
            if ours and peer_values:
                medians = {n: statistics.median(v) for n, v in peer_values.items()}
                best = max(medians, key=medians.get)
                print(f"  {ours_name}'s median / the fastest PyTorch median of either precision: "
                      f"{statistics.median(ours) / medians[best]:.2f}x ({best})")
        if vs_ours:
            each = ", ".join(f"{r:.2f}x" for r in vs_ours)
            print(f"  {ours_name} / singularity fp32 of the same round: "
                  f"median {statistics.median(vs_ours):.2f}x ({each})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work")
    for name in ("layers", "width", "heads", "context", "batch", "vocab", "skip"):
        ap.add_argument("--" + name, type=int, required=True)
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="the runs' precision: names Singularity's row, picks the peak")
    ap.add_argument("--fp32-work", metavar="DIR",
                    help="with --precision bf16: the fp32 work directory of the same rounds")
    a = ap.parse_args()
    if a.fp32_work and a.precision == "fp32":
        ap.error("--fp32-work goes with --precision bf16")
    work, L, C, T, V = a.work, a.layers, a.width, a.context, a.vocab

    # GPT-2 parameters: wte + wpe + L blocks (2 layernorms, c_attn, c_proj, c_fc, mlp c_proj) + ln_f.
    n_params = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
    flops_per_token = 6 * n_params + 6 * L * T * C

    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(auto)')}")
    print(f"GPT-2 L={L} C={C} T={T} V={V} batch {a.batch}: {n_params:,} parameters, "
          f"{flops_per_token / 1e6:.1f} MFLOP/token (6N + 6LTC)")
    if a.precision != "fp32":
        print(f"{a.precision}: singularity with train.precision={a.precision}, PyTorch under "
              f"torch.autocast('cpu', dtype=torch.bfloat16) (optimizer in fp32)")
    dirs = round_dirs(work)
    results = []
    for k, rd in enumerate(dirs, 1):
        if len(dirs) > 1:
            print(f"\nRound {k} of {len(dirs)}")
        load = read_text(os.path.join(rd, "load.txt"))
        if load:
            print("load average (1, 5, 15 min) " + load.replace("\n", "; "))
        steps = singularity_steps(rd)
        singularity, torch_best, rows = print_peers(rd, steps, a.skip, a.precision)
        fraction = sustained_fraction = None
        if singularity is not None:
            fraction, sustained_fraction = peak_fraction(rd, singularity, flops_per_token,
                                                         a.precision)
            timed = steps[a.skip:]
            if all("mfu" in s for s in timed):
                print(f"singularity's own logged mfu:      "
                      f"{statistics.median(s['mfu'] for s in timed):.3f} (median)")
        results.append((rows, singularity, torch_best, fraction, sustained_fraction))
    if len(dirs) > 1:
        print_summary(results, a.precision)
    if a.fp32_work:
        print_cross_precision(work, a.fp32_work, a, results)
    if results[-1][1] is not None:
        if len(dirs) > 1:
            print(f"\nPer-op breakdown from round {len(dirs)}:")
        print_breakdown(dirs[-1], a, singularity_steps(dirs[-1]))


if __name__ == "__main__":
    main()
