#!/usr/bin/python3
"""Reference outputs from torchvision / PIL for tests/imagenet (run at test time, nothing stored).

  eval OUT IMAGE...            Resize(256) + CenterCrop(224) + ToTensor + Normalize, float32 (N,3,224,224)
  crop OUT IMAGE X Y W H FLIP  PIL crop((X, Y, X+W, Y+H)) + resize(224, BILINEAR) [+ flip] + ToTensor + Normalize
  cmyk JPEG RGB                a 64x48 CMYK JPEG with a colour gradient, and PIL's RGB decode of it (uint8 HWC)
"""
import sys

import numpy as np
from PIL import Image
from torchvision import transforms

NORMALIZE = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])


def main():
    mode = sys.argv[1]
    if mode == "eval":
        t = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), NORMALIZE])
        out = np.stack([t(Image.open(p).convert("RGB")).numpy() for p in sys.argv[3:]])
        out.astype(np.float32).tofile(sys.argv[2])
    elif mode == "crop":
        path, x, y, w, h, flip = sys.argv[3], *map(int, sys.argv[4:9])
        img = Image.open(path).convert("RGB").crop((x, y, x + w, y + h)).resize((224, 224), Image.BILINEAR)
        if flip:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        NORMALIZE(transforms.ToTensor()(img)).numpy().astype(np.float32).tofile(sys.argv[2])
    elif mode == "cmyk":
        yy, xx = np.mgrid[0:48, 0:64]
        cmyk = np.stack([xx * 4, yy * 5, (xx + yy) * 2, 255 - (xx * 2 + yy)], axis=-1).clip(0, 255).astype(np.uint8)
        Image.fromarray(cmyk, mode="CMYK").save(sys.argv[2], quality=95)
        decoded = Image.open(sys.argv[2])
        assert decoded.mode == "CMYK", decoded.mode
        np.asarray(decoded.convert("RGB"), dtype=np.uint8).tofile(sys.argv[3])
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
