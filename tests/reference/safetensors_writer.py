"""The safetensors format written by hand (no dependency): u64 LE header length, JSON header,
raw little-endian data. Shared by the golden-file scripts."""
import json
import os
import struct

import torch


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, torch tensor of float32 or int32); metadata: {str: str}."""
    dtype_names = {torch.float32: "F32", torch.int32: "I32"}
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, t in tensors:
        t = t.detach().contiguous().cpu()
        data = t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype_names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)  # pad so the data section is 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for data in blobs:
            f.write(data)
    os.replace(tmp, path)
