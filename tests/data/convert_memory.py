#!/usr/bin/python3
"""convert_memory.py RINGTRAIN WORKDIR
convert images streams: its peak memory does not grow with the number of
images. 600 and 3,000 generated 256x256 JPEGs (3,000 x 192 KiB = 563 MiB of
pixels) are converted; the larger run's peak RSS must stay within 100 MiB of
the smaller one's (holding all pixels would add ~450 MiB)."""
import os
import resource
import shutil
import subprocess
import sys

from PIL import Image

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
photo = Image.open("/usr/lib/python3/dist-packages/sklearn/datasets/images/china.jpg").convert("RGB")


def make(folder, n):
    for i in range(n):
        d = f"{folder}/c{i % 3}"
        if i < 3:
            os.makedirs(d)
        x, y = (i * 37) % 380, (i * 23) % 170
        photo.crop((x, y, x + 256, y + 256)).save(f"{d}/{i:05d}.jpg", quality=80)


def peak_rss_mib(folder, out):
    # A fresh process per run: RUSAGE_CHILDREN is the largest child's peak, so
    # measure the small run first and the large one in its own interpreter.
    code = ("import resource,subprocess,sys;"
            "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    cmd = [sys.executable, "-c", code, exe, "convert", "images", "--train", folder,
           "--test-fraction", "0.1", "--workers", "2", "--no-progress", "-o", out]
    return int(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout) / 1024


make(f"{work}/small", 600)
make(f"{work}/large", 3000)
small = peak_rss_mib(f"{work}/small", f"{work}/small.h5")
large = peak_rss_mib(f"{work}/large", f"{work}/large.h5")
print(f"peak RSS: 600 images {small:.0f} MiB, 3000 images {large:.0f} MiB")
shutil.rmtree(work, ignore_errors=True)
if large - small < 100:
    print("PASS: memory does not grow with the number of images")
else:
    print("FAIL: memory grew with the number of images")
    sys.exit(1)
