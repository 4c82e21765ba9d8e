#!/usr/bin/python3
"""Golden values for the ResNet whole-model test (docs/architecture.md, "Testing"): tiny ResNets
built from torchvision's own blocks (BasicBlock, and Bottleneck with the v1.5 stride on its 3x3),
one training step in float64 from float32 initial weights; the float32 model's deviation from it is
printed as a check of the conditioning.

    /usr/bin/python3 tests/reference/resnet_reference.py [--out tests/reference/resnet_tiny.safetensors]

For each model <m>: r10 (BasicBlocks [1,1,1,1]) and b14 (Bottlenecks [1,1,1,1]: every layer
downsamples, layer1 widening 4 -> 16 channels), width 4 (torchvision's 64 scaled down); 10
classes, 40x40 images, a batch of 4. (A deeper bottleneck net, ResNet-50 at this width, is
ill-conditioned in float32: PyTorch's own float32 gradients then differ from float64 by up to
1e-1, so it cannot be a 1e-4 reference; these two differ by 2e-6 and 4e-6.) The file holds:
  <m>.param.<name>    F32  initial weights (torchvision names and layouts)
  <m>.buffer.<name>   F32  initial running_mean / running_var
  <m>.grad.<name>     F32  d(mean loss)/d(param), training mode (batch statistics)
  <m>.running.<name>  F32  running statistics after that forward (momentum 0.1)
  <m>.stepped.<name>  F32  weights after one SGD step (lr 0.1, momentum 0.9, Nesterov, weight
                           decay 1e-4 on convolution and fc weights only)
  <m>.logits          F32  (4, 10) training-mode logits
  <m>.loss            F32  (1) cross-entropy with label smoothing 0.1
  <m>.eval_logits     F32  (4, 10) evaluation-mode logits of the stepped weights and statistics
  images              F32  (4, 3, 40, 40), labels I32 (4)
The values are float64 results rounded once to float32.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_writer import write_safetensors  # noqa: E402

CLASSES, IMAGE, BATCH = 10, 40, 4
SEED = 20261130
SMOOTHING = 0.1
SGD = dict(lr=0.1, momentum=0.9, nesterov=True)
WEIGHT_DECAY = 1e-4
MODELS = {"r10": (BasicBlock, [1, 1, 1, 1], 4), "b14": (Bottleneck, [1, 1, 1, 1], 4)}


def tiny_resnet(block, layers, width):
    """torchvision's ResNet with its widths scaled from 64 to `width`, built by its own code."""
    m = ResNet(block, [1, 1, 1, 1], num_classes=CLASSES)
    m.inplanes = width
    m.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
    m.bn1 = nn.BatchNorm2d(width)
    m.layer1 = m._make_layer(block, width, layers[0])
    m.layer2 = m._make_layer(block, width * 2, layers[1], stride=2)
    m.layer3 = m._make_layer(block, width * 4, layers[2], stride=2)
    m.layer4 = m._make_layer(block, width * 8, layers[3], stride=2)
    m.fc = nn.Linear(width * 8 * block.expansion, CLASSES)
    for mod in m.modules():  # torchvision's initialisation
        if isinstance(mod, nn.Conv2d):
            nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(mod, nn.BatchNorm2d):
            # Not 1 and 0: the affine parameters and running statistics must matter.
            nn.init.uniform_(mod.weight, 0.5, 1.5)
            nn.init.uniform_(mod.bias, -0.2, 0.2)
            nn.init.uniform_(mod.running_mean, -0.1, 0.1)
            nn.init.uniform_(mod.running_var, 0.5, 1.5)
    return m


def round_to_float32(model):
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.dtype == torch.float64:
                t.copy_(t.float().double())


def tensors_of(model, prefix):
    out = []
    for name, p in model.named_parameters():
        out.append((f"{prefix}.param.{name}", p.detach().float()))
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            out.append((f"{prefix}.buffer.{name}", b.detach().float()))
    return out


def run(prefix, block, layers, width, images, labels):
    model = tiny_resnet(block, layers, width).double()
    round_to_float32(model)  # the golden is exact for the stored float32 weights
    out = tensors_of(model, prefix)
    model.train()
    logits = model(images.double())
    loss = F.cross_entropy(logits, labels.long(), label_smoothing=SMOOTHING)
    loss.backward()
    out.append((f"{prefix}.logits", logits.detach().float()))
    out.append((f"{prefix}.loss", loss.detach().float().reshape(1)))
    for name, p in model.named_parameters():
        out.append((f"{prefix}.grad.{name}", p.grad.detach().float()))
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            out.append((f"{prefix}.running.{name}", b.detach().float()))
    decay = [p for n, p in model.named_parameters() if p.dim() > 1]
    no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                 {"params": no_decay, "weight_decay": 0.0}], **SGD)
    optimizer.step()
    for name, p in model.named_parameters():
        out.append((f"{prefix}.stepped.{name}", p.detach().float()))
    model.eval()
    with torch.no_grad():
        out.append((f"{prefix}.eval_logits", model(images.double()).float()))
    parameters = sum(p.numel() for p in model.parameters())
    print(f"{prefix}: {parameters} parameters, loss {loss.item():.8f}, float32 gradients within "
          f"{float32_deviation(block, layers, width, images, labels):.2g} of float64")
    return out


def float32_deviation(block, layers, width, images, labels):
    """Worst per-tensor relative difference of PyTorch's float32 gradients from float64."""
    grads = []
    for dtype in (torch.float64, torch.float32):
        torch.manual_seed(SEED + 1)
        model = tiny_resnet(block, layers, width).double()
        round_to_float32(model)
        model = model.to(dtype).train()
        loss = F.cross_entropy(model(images.to(dtype)), labels.long(), label_smoothing=SMOOTHING)
        loss.backward()
        grads.append([p.grad.double() for p in model.parameters()])
    return max(((g32 - g64).abs().max() / g64.abs().max()).item()
               for g64, g32 in zip(grads[0], grads[1]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "resnet_tiny.safetensors"))
    args = parser.parse_args()
    torch.manual_seed(SEED)
    images = torch.randn(BATCH, 3, IMAGE, IMAGE)
    labels = torch.randint(0, CLASSES, (BATCH,), dtype=torch.int32)
    tensors = [("images", images), ("labels", labels)]
    for prefix, (block, layers, width) in MODELS.items():
        tensors += run(prefix, block, layers, width, images, labels)
    metadata = {"classes": str(CLASSES), "image_size": str(IMAGE),
                "batch": str(BATCH), "label_smoothing": str(SMOOTHING), "lr": str(SGD["lr"]),
                "momentum": str(SGD["momentum"]), "nesterov": "true",
                "weight_decay": str(WEIGHT_DECAY), "bn_momentum": "0.1", "bn_eps": "1e-05",
                "models": "r10:10:4,b14:14:4"}
    write_safetensors(args.out, tensors, metadata)
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
