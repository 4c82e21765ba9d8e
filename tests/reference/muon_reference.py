#!/usr/bin/env python3
"""Golden values for the Muon test (tests/optim/muon_reference_test.cpp): torch.optim.Muon (PyTorch
2.9 or later) on two hidden matrices, one tall and one wide, and torch.optim.AdamW on an
embedding and a norm, as optim.name muon splits them, for STEPS steps of fixed random gradients.

    VENV/bin/python tests/reference/muon_reference.py [--check]

VENV: a venv with torch >= 2.9 from PyPI (python3 -m venv VENV && VENV/bin/pip install torch
numpy; about 4 GB with its CUDA wheels, which run on the CPU). Writes
tests/reference/muon_steps.safetensors holding the initial parameters (init.<name>), the
gradient of each step (grad.<step>.<name>) and the parameters after each step
(param.<step>.<name>); --check instead recomputes and compares with that file.

torch's Newton-Schulz iteration works in bfloat16 (a GPU speed choice); ours in fp32. The golden
values run torch's Muon with that one line changed to float64 (the parameters are float64 too),
so the test measures the algorithm, not bf16 rounding; the script also prints how far torch's own
bf16 iteration lands from it.
"""
import argparse
import os
import sys

import torch
import torch.optim._muon as muon_module

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_writer import write_safetensors  # noqa: E402

STEPS = 6
SEED = 20261206
HYPER = dict(lr=3e-3, muon_lr=0.02, weight_decay=0.1, momentum=0.95, betas=(0.9, 0.95), eps=1e-8)
# name, shape, optimizer (in flat-buffer order: the embedding before the block, as a layout has it)
TENSORS = [("embed", (50, 16), "adamw"), ("layer.w_tall", (24, 16), "muon"),
           ("layer.w_wide", (16, 40), "muon"), ("layer.norm", (16,), "adamw")]

original_ns = muon_module._zeropower_via_newtonschulz


def float64_ns(grad, ns_coefficients, ns_steps, eps):
    """torch's iteration with its working type float64 instead of bfloat16 (the only change)."""
    a, b, c = ns_coefficients
    x = grad.to(dtype=torch.float64, copy=True)
    if grad.size(0) > grad.size(1):
        x = x.T
    x.div_(x.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = x @ x.T
        update = torch.addmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.addmm(x, update, x, beta=a)
    if grad.size(0) > grad.size(1):
        x = x.T
    return x


def run(init, grads, dtype):
    params = {n: init[n].to(dtype).clone().requires_grad_(True) for n, _, _ in TENSORS}
    matrices = [params[n] for n, _, kind in TENSORS if kind == "muon"]
    decayed = [params["embed"]]
    plain = [params["layer.norm"]]
    muon = torch.optim.Muon(matrices, lr=HYPER["muon_lr"], weight_decay=HYPER["weight_decay"],
                            momentum=HYPER["momentum"], nesterov=True)
    adamw = torch.optim.AdamW([{"params": decayed, "weight_decay": HYPER["weight_decay"]},
                               {"params": plain, "weight_decay": 0.0}],
                              lr=HYPER["lr"], betas=HYPER["betas"], eps=HYPER["eps"])
    history = []
    for step in range(STEPS):
        for n, p in params.items():
            p.grad = grads[step][n].to(dtype).clone()
        muon.step()
        adamw.step()
        history.append({n: p.detach().clone() for n, p in params.items()})
    return history


def relative(a, b):
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "muon_steps.safetensors")
    g = torch.Generator().manual_seed(SEED)
    init = {n: (0.05 * torch.randn(shape, generator=g)).float() for n, shape, _ in TENSORS}
    init["layer.norm"] = 1.0 + init["layer.norm"]
    grads = [{n: (0.01 * torch.randn(shape, generator=g)).float() for n, shape, _ in TENSORS}
             for _ in range(STEPS)]

    muon_module._zeropower_via_newtonschulz = float64_ns
    golden = run(init, grads, torch.float64)
    muon_module._zeropower_via_newtonschulz = original_ns
    bf16 = run(init, grads, torch.float32)
    worst = max(relative(bf16[-1][n], golden[-1][n]) for n, _, kind in TENSORS if kind == "muon")
    print(f"torch {torch.__version__}: its own bf16 Newton-Schulz after {STEPS} steps lands "
          f"{worst:.2e} (relative) from the float64 iteration")

    tensors = [(f"init.{n}", init[n]) for n, _, _ in TENSORS]
    for step in range(STEPS):
        tensors += [(f"grad.{step}.{n}", grads[step][n]) for n, _, _ in TENSORS]
        tensors += [(f"param.{step}.{n}", golden[step][n].float()) for n, _, _ in TENSORS]
    metadata = {k: str(v) for k, v in HYPER.items() if k != "betas"}
    metadata.update({"beta1": str(HYPER["betas"][0]), "beta2": str(HYPER["betas"][1]),
                     "steps": str(STEPS), "torch_version": torch.__version__,
                     "generator": "tests/reference/muon_reference.py",
                     "tensors": ",".join(f"{n}:{'x'.join(map(str, s))}:{k}" for n, s, k in TENSORS)})
    if args.check:
        import safetensors.torch
        committed = safetensors.torch.load_file(path)
        bad = [name for name, t in tensors if not torch.allclose(committed[name], t, rtol=0, atol=1e-7)]
        print("check:", "the committed golden file is torch's" if not bad else f"differs in {bad}")
        sys.exit(1 if bad else 0)
    write_safetensors(path, tensors, metadata)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
