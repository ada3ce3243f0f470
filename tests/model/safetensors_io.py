"""safetensors reading and writing for the PyTorch reference tests (the
format ringtrain's `weights` commands speak: an 8-byte header length, a JSON
header, raw little-endian tensors), and running the ringtrain CLI."""
import json
import struct
import subprocess
import sys

import numpy as np
import torch


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        if t.dtype == torch.int64:
            dtype, data = "I64", t.numpy().tobytes()
        else:
            dtype, data = "F32", t.float().numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """The F32 tensors of a file, by name."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__" or e["dtype"] != "F32":
            continue
        b, end = e["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[b:end], dtype=np.float32).copy()).reshape(
            e["shape"])
    return out


def run(cmd, env):
    """Runs cmd; on a non-zero exit prints its output and fails the test."""
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: %s exited %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
        sys.exit(1)
    return r.stdout + r.stderr
