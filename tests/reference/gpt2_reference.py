#!/usr/bin/python3
"""Golden values for the whole-model test (docs/architecture.md, "Testing"): a tiny GPT-2's logits,
loss, gradients and five AdamW steps, computed by PyTorch in float64 from float32 initial weights.

    /usr/bin/python3 tests/reference/gpt2_reference.py [--out tests/reference/gpt2_tiny.safetensors]

Writes a safetensors file (written by hand, no dependency: u64 LE header length, JSON header,
raw little-endian data) holding:
  param.<name>    F32   initial weights, (out, in) like nn.Linear; names as in gpt2_model.py
  grad.<name>     F32   d(mean loss)/d(param) at the initial weights
  inputs          I32   (B,T) tokens in [0,V)
  targets         I32   (B,T)
  logits          F32   (B,T,V)   unpadded vocabulary
  loss            F32   (1)
  adamw_losses    F32   (5)  loss before each of 5 AdamW steps on the same batch
  adamw_grad_norms F32  (5)  global gradient norm (before clipping) at each of those steps
__metadata__ holds the config and the optimizer hyperparameters as strings.

The golden values are float64 results rounded once to float32, i.e. the exact answer for the
stored float32 weights, not PyTorch's float32 rounding. As a sanity check the script also runs
the float32 model through autograd and prints the max relative differences.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_model import GPT2, decay_and_no_decay  # noqa: E402
from safetensors_writer import write_safetensors  # noqa: E402

CONFIG = dict(n_layer=2, n_embd=64, n_head=4, context=32, vocab=100)
BATCH = 4
SEED = 20240917
ADAMW = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
GRAD_CLIP = 1.0
# Larger than GPT-2's 0.02 so the first gradient norm (about 1.7) exceeds GRAD_CLIP and clipping
# acts on every one of the AdamW steps (at 0.02 it is 0.86 and clipping would go untested).
INIT_STD = 0.05
ADAMW_STEPS = 5


def make_initial_model(generator):
    """GPT-2 init, then non-trivial biases and layernorm parameters so every gradient is tested."""
    model = GPT2(**CONFIG)
    model.init_gpt2(generator, std=INIT_STD)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                noise = 0.1 * torch.randn(p.shape, generator=generator)
                is_gain = name.endswith(".weight")  # layernorm weight
                p.copy_(1.0 + noise if is_gain else noise)
    return model


def loss_and_grads(model, inputs, targets):
    model.zero_grad(set_to_none=True)
    logits, loss = model(inputs, targets)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def max_rel_diff(a, b):
    """max |a-b| / max|b|: relative to the tensor's scale, so near-zero entries do not dominate."""
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item()


def run_adamw(model, inputs, targets):
    decay, no_decay = decay_and_no_decay(model)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": ADAMW["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
    losses, norms = [], []
    for _ in range(ADAMW_STEPS):
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        losses.append(loss.item())
        norms.append(norm.item())
        optimizer.step()
    return losses, norms


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "gpt2_tiny.safetensors"))
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    generator = torch.Generator().manual_seed(SEED)
    model32 = make_initial_model(generator)
    B, T, V = BATCH, CONFIG["context"], CONFIG["vocab"]
    inputs = torch.randint(0, V, (B, T), generator=generator)
    targets = torch.randint(0, V, (B, T), generator=generator)
    initial = {n: p.detach().clone() for n, p in model32.named_parameters()}

    # The golden answer: float64 from the float32 weights.
    model64 = make_initial_model(torch.Generator().manual_seed(SEED)).double()
    with torch.no_grad():
        for n, p in model64.named_parameters():
            p.copy_(initial[n].double())
    logits64, loss64, grads64 = loss_and_grads(model64, inputs, targets)

    # Sanity: PyTorch float32 autograd should agree to float32 rounding.
    logits32, loss32, grads32 = loss_and_grads(model32, inputs, targets)
    print(f"fp32 vs fp64 max relative difference: logits {max_rel_diff(logits32, logits64):.3e}"
          f"  loss {max_rel_diff(loss32, loss64):.3e}")
    worst = max(grads64, key=lambda n: max_rel_diff(grads32[n], grads64[n]))
    print(f"  grads: worst {worst} {max_rel_diff(grads32[worst], grads64[worst]):.3e}")
    for n in grads64:
        print(f"    {n:28s} {max_rel_diff(grads32[n], grads64[n]):.3e}")

    adamw_losses, adamw_norms = run_adamw(model64, inputs, targets)
    first_norm = adamw_norms[0]
    print(f"loss {loss64.item():.9g}; first gradient norm {first_norm:.6g} "
          f"({'above' if first_norm > GRAD_CLIP else 'below'} the clip {GRAD_CLIP})")
    print("adamw losses", " ".join(f"{x:.9g}" for x in adamw_losses))

    tensors = [(f"param.{n}", t) for n, t in initial.items()]
    tensors += [(f"grad.{n}", g.float()) for n, g in grads64.items()]
    tensors += [
        ("inputs", inputs.to(torch.int32)),
        ("targets", targets.to(torch.int32)),
        ("logits", logits64.float()),
        ("loss", loss64.float().reshape(1)),
        ("adamw_losses", torch.tensor(adamw_losses, dtype=torch.float64).float()),
        ("adamw_grad_norms", torch.tensor(adamw_norms, dtype=torch.float64).float()),
    ]
    n_params = sum(t.numel() for t in initial.values())
    metadata = {
        "format": "singularity gpt2 reference v1",
        "generator": "tests/reference/gpt2_reference.py",
        "torch_version": torch.__version__,
        "seed": str(SEED),
        "n_layer": str(CONFIG["n_layer"]), "n_embd": str(CONFIG["n_embd"]),
        "n_head": str(CONFIG["n_head"]), "context": str(CONFIG["context"]),
        "vocab": str(CONFIG["vocab"]), "batch": str(B), "seq_len": str(T),
        "n_params": str(n_params),
        "init": f"normal(0, {INIT_STD}) weights, c_proj weights std {INIT_STD}/sqrt(2*n_layer), "
                "layernorm gains 1 + 0.1*randn, all biases 0.1*randn",
        "layernorm_eps": "1e-5", "gelu": "tanh", "tied_embeddings": "true",
        "weight_layout": "(out, in) like nn.Linear",
        "loss": "mean cross-entropy over B*T",
        "precision": "float64 compute from the stored float32 weights, results rounded to float32",
        "adamw_lr": "0.001", "adamw_beta1": "0.9", "adamw_beta2": "0.95", "adamw_eps": "1e-08",
        "adamw_weight_decay": "0.1",
        "adamw_weight_decay_on": "params with dim >= 2 (wte, wpe, Linear weights)",
        "adamw_steps": str(ADAMW_STEPS), "adamw_lr_schedule": "constant",
        "adamw_same_batch": "true",
        "grad_clip": "1.0",
        "grad_clip_how": "torch.nn.utils.clip_grad_norm_ (global L2 norm, scale by clip/(norm+1e-6))",
        "first_grad_norm": f"{first_norm:.9g}",
        "first_grad_norm_above_clip": "true" if first_norm > GRAD_CLIP else "false",
    }
    write_safetensors(args.out, tensors, metadata)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes, {n_params} parameters)")


if __name__ == "__main__":
    main()
