#!/usr/bin/python3
"""The PyTorch side of the CPU benchmark: trains the same GPT-2 as Singularity (the model in
tests/reference/gpt2_model.py) in fp32 (or bf16 autocast, --bf16) with AdamW on random tokens, and prints one JSON line

    {"tokens_per_s": ..., "step_ms": ..., "threads": N, ...}

with tokens_per_s and step_ms the medians over the timed steps (those after --warmup).
Each step: forward, backward, clip_grad_norm_(1.0), AdamW step (weight decay on dim >= 2).

    /usr/bin/python3 scripts/bench/gpt_torch.py --threads 2 --steps 20 --warmup 5

--modern (PyTorch >= 2.0) trains scripts/bench/gpt2_modern.py instead, the same model written as
a PyTorch user writes it today: scaled_dot_product_attention(is_causal=True), tied nn.Linear LM
head, AdamW(fused=True). --compile (with --modern) wraps the model in torch.compile; the warm-up
steps then include the compilation, whose time is reported as "first_step_s".

    ~/.cache/singularity/torch-venv/bin/python scripts/bench/gpt_torch.py --modern --compile

--bf16 runs the forward pass and the loss under torch.autocast("cpu", dtype=torch.bfloat16), what a
user of a CPU with bf16 instructions (avx512_bf16, AMX) writes: the linear layers' and attention's
products in bf16, the parameters, gradients and the AdamW state in fp32.

    ~/.cache/singularity/torch-venv/bin/python scripts/bench/gpt_torch.py --modern --compile --bf16
"""
import contextlib
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "reference"))
import gpt2_model  # noqa: E402
from gpt2_model import count_parameters, decay_and_no_decay  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description="PyTorch GPT-2 CPU training throughput")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--modern", action="store_true",
                    help="scripts/bench/gpt2_modern.py (SDPA, tied head) and fused AdamW")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (needs --modern)")
    ap.add_argument("--bf16", action="store_true",
                    help="forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("need --steps >= 1, --warmup >= 0, --threads >= 1")
    if args.compile and not args.modern:
        ap.error("--compile needs --modern")
    if args.compile and args.warmup < 1:
        ap.error("--compile needs --warmup >= 1 (the first step compiles)")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.modern:
        import gpt2_modern
        model = gpt2_modern.GPT2(args.layers, args.width, args.heads, args.context, args.vocab)
    else:
        model = gpt2_model.GPT2(args.layers, args.width, args.heads, args.context, args.vocab)
    model.init_gpt2(torch.Generator().manual_seed(args.seed))
    decay, no_decay = decay_and_no_decay(model)
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    if args.modern:
        optimizer = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    else:
        optimizer = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8)  # foreach
    step_model = torch.compile(model) if args.compile else model
    if args.bf16:
        autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    else:
        autocast = contextlib.nullcontext

    tokens_per_step = args.batch * args.context
    step_seconds, step_seconds_all, losses = [], [], []
    for step in range(args.warmup + args.steps):
        batch = torch.randint(0, args.vocab, (args.batch, args.context + 1))
        inputs, targets = batch[:, :-1], batch[:, 1:]
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            _, loss = step_model(inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss_value = loss.item()
        elapsed = time.perf_counter() - t0
        step_seconds_all.append(elapsed)
        if step >= args.warmup:
            step_seconds.append(elapsed)
        losses.append(loss_value)
        print(f"step {step} loss {loss_value:.4f} {elapsed * 1e3:.0f} ms", file=sys.stderr)

    median_s = statistics.median(step_seconds)
    print(json.dumps({
        "tokens_per_s": tokens_per_step / median_s,
        "step_ms": median_s * 1e3,
        "threads": args.threads,
        "timed_steps": args.steps,
        "warmup_steps": args.warmup,
        "tokens_per_step": tokens_per_step,
        "params": count_parameters(model),
        "final_loss": losses[-1],
        "torch": torch.__version__,
        "variant": (("compiled" if args.compile else "eager") + (", modern" if args.modern else "")
                    + (", bf16 autocast" if args.bf16 else "")),
        "precision": "bf16 autocast" if args.bf16 else "fp32",
        "first_step_s": step_seconds_all[0],
    }))


if __name__ == "__main__":
    main()
