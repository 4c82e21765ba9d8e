#!/usr/bin/python3
"""The PyTorch side of the ResNet CPU benchmark: trains torchvision's resnetNN in fp32 (or bf16
autocast, --bf16) on random images and labels with SGD (momentum 0.9, weight decay 1e-4 on
weights only) and prints one JSON line

    {"images_per_s": ..., "step_ms": ..., "peak_rss_bytes": ..., "torch": "2.x", ...}

with images_per_s and step_ms the medians over the timed steps (those after --warmup). Each
step: forward (training mode, batch statistics), cross-entropy, backward, SGD step.
--channels-last runs the model and its input in NHWC (PyTorch's fast CPU layout for
convolutions); --compile wraps the model in torch.compile (PyTorch 2); --bf16 runs forward and
loss under torch.autocast("cpu", dtype=torch.bfloat16), what a user of a CPU with bf16
instructions (avx512_bf16, AMX) writes (convolutions and the linear layer in bf16; parameters,
gradients and the SGD state in fp32).

    python scripts/bench/resnet_torch.py --depth 50 --batch 8 --threads 2 --steps 5 --warmup 2
"""
import argparse
import contextlib
import json
import resource
import statistics
import sys
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser(description="PyTorch ResNet CPU training throughput")
    ap.add_argument("--depth", type=int, default=50)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before them")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--bf16", action="store_true",
                    help="forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    model = getattr(torchvision.models, f"resnet{args.depth}")(num_classes=args.classes)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format).train()
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=0.1, momentum=0.9)
    step_fn = model
    if args.compile:
        step_fn = torch.compile(model)
    loss_fn = torch.nn.CrossEntropyLoss()
    if args.bf16:
        autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    else:
        autocast = contextlib.nullcontext
    seconds = []
    for step in range(args.warmup + args.steps):
        images = torch.randn(args.batch, 3, args.image, args.image).to(memory_format=memory_format)
        labels = torch.randint(0, args.classes, (args.batch,))
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(step_fn(images), labels)
        loss.backward()
        optimizer.step()
        loss_value = loss.item()
        elapsed = time.perf_counter() - t0
        if step >= args.warmup:
            seconds.append(elapsed)
        print(f"step {step} loss {loss_value:.4f} {elapsed * 1e3:.0f} ms", file=sys.stderr)
    median = statistics.median(seconds)
    print(json.dumps({
        "images_per_s": args.batch / median,
        "step_ms": median * 1e3,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "threads": args.threads,
        "batch": args.batch,
        "depth": args.depth,
        "channels_last": args.channels_last,
        "compile": args.compile,
        "bf16": args.bf16,
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
