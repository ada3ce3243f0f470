#!/usr/bin/env python3
"""make_jpeg_tree.py OUT [--classes K] [--per-class N] [--seed S] [--quality Q]

A class-folder tree of JPEG photographs of ImageNet-like sizes (torchvision's
ImageFolder layout, OUT/<class>/<image>.jpg), for timing a loader that
decodes and augments: each image has its own size (short side 300-480, long
side up to 640, as most of ImageNet's training images), smooth shapes with
fine noise over them, so that it compresses to about ImageNet's bytes per
pixel at quality 90 rather than to a few kilobytes.
"""
import argparse
import os
from multiprocessing import Pool

import numpy as np
from PIL import Image


def make(job):
    out, cls, i, seed, quality = job
    rng = np.random.default_rng([seed, cls, i])
    short = int(rng.integers(300, 481))
    long = int(rng.integers(short, 641))
    h, w = (short, long) if rng.random() < 0.75 else (long, short)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.empty((h, w, 3), np.float32)
    for c in range(3):
        fx, fy, phase = rng.uniform(0.005, 0.05, 2).tolist() + [rng.uniform(0, 6.3)]
        img[..., c] = 128 + 90 * np.sin(fx * x + fy * y + phase) * np.cos(fy * x - fx * y)
    img += rng.normal(0, 12, img.shape).astype(np.float32)
    path = os.path.join(out, f"class{cls:03d}", f"img{i:05d}.jpg")
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(path, quality=quality)
    return os.path.getsize(path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[2])
    p.add_argument("out")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--per-class", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quality", type=int, default=90)
    a = p.parse_args()
    for c in range(a.classes):
        os.makedirs(os.path.join(a.out, f"class{c:03d}"), exist_ok=True)
    jobs = [(a.out, c, i, a.seed, a.quality) for c in range(a.classes) for i in range(a.per_class)]
    with Pool() as pool:
        sizes = pool.map(make, jobs, chunksize=8)
    print(f"{len(sizes)} JPEG images in {a.classes} classes, {sum(sizes) / len(sizes) / 1024:.0f} KiB "
          f"on average, in {a.out}")


if __name__ == "__main__":
    main()
