#!/usr/bin/python3
"""torchvision/PIL side of scripts/bench/imagenet-cpu: decode + augment images/s on one thread.

Training: RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize (the reference
ImageNet recipe); --split val: Resize(256) + CenterCrop(224) + ToTensor + Normalize. The JPEGs are
read into memory first, as in bench/imagenet_bench.cpp. Prints one JSON line.
"""
import argparse
import io
import json
import os
import time

import torch
import torchvision
from PIL import Image
from torchvision import transforms


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--split", choices=["train", "val"], default="train")
    args = p.parse_args()
    torch.set_num_threads(1)
    paths = sorted(os.path.join(r, f) for r, _, fs in os.walk(args.dir) for f in fs
                   if f.lower().endswith((".jpeg", ".jpg")))
    files = [open(p, "rb").read() for p in paths]
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    if args.split == "train":
        t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                transforms.ToTensor(), normalize])
    else:
        t = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), normalize])
    torch.manual_seed(1)

    def run_pass():
        for b in files:
            t(Image.open(io.BytesIO(b)).convert("RGB"))

    run_pass()  # warm-up
    start, cpu_start = time.perf_counter(), time.thread_time()
    for _ in range(args.passes):
        run_pass()
    seconds, cpu_seconds = time.perf_counter() - start, time.thread_time() - cpu_start
    n = len(files) * args.passes
    print(json.dumps({"images_per_s": n / seconds, "ms_per_image": 1000 * seconds / n, "cpu_images_per_s": n / cpu_seconds, "images": len(files),
                      "passes": args.passes, "split": args.split, "torch": torch.__version__,
                      "torchvision": torchvision.__version__, "pil": Image.__version__}))


if __name__ == "__main__":
    main()
