#!/usr/bin/env python3
"""The heaviest kernels of an Nsight Compute run, from its raw CSV page.

`ncu --csv --page raw --metrics gpu__time_duration.sum CMD` prints one row per
kernel launch (a header row, a units row, then the launches); this adds each
kernel's time over its launches and prints the N heaviest with their launch
count, total and share, so that two programs doing the same work (ringtrain and
its PyTorch peer, launch/gpu-checks.sh's `kernels` check) can be set side by
side kernel by kernel.

usage: ncu_kernel_table.py CSV [--top N] [--skip-launches K]
  --skip-launches K  leave out the first K launches (start-up and warm-up steps)
"""
import argparse
import csv
import io
import sys

UNIT_MS = {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0,
           "second": 1e3, "s": 1e3}
METRIC = "gpu__time_duration.sum"


def read_launches(text):
    """[(kernel name, ms)] in launch order, from the raw page's CSV (which ncu
    may precede with its own "==PROF==" lines and the program's output)."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"') and "Kernel Name" in l), None)
    if start is None:
        raise ValueError("no ncu raw CSV header (a line starting \"ID\" with \"Kernel Name\")")
    rows = list(csv.reader(io.StringIO("\n".join(l for l in lines[start:] if l.startswith('"')))))
    header = rows[0]
    name_col, time_col = header.index("Kernel Name"), header.index(METRIC)
    scale = None
    launches = []
    for row in rows[1:]:
        if len(row) <= max(name_col, time_col):
            continue
        if scale is None and not row[0].strip():  # the units row
            scale = UNIT_MS.get(row[time_col].strip())
            if scale is None:
                raise ValueError("unknown unit %r for %s" % (row[time_col], METRIC))
            continue
        value = row[time_col].replace(",", "").strip()
        try:
            launches.append((row[name_col], float(value) * (scale if scale is not None else 1e-6)))
        except ValueError:
            continue  # "n/a" for a launch ncu could not measure
    return launches


def table(launches, top):
    totals = {}
    for name, ms in launches:
        count, total = totals.get(name, (0, 0.0))
        totals[name] = (count + 1, total + ms)
    return totals_table(totals, top)


def totals_table(totals, top):
    """{kernel name: (launches, total ms)} as the table, heaviest first (also the
    format of launch/bench/peer_gpu_models.py --kernel-table)."""
    whole = sum(t for _, t in totals.values()) or 1.0
    out = ["%9s %6s %6s  %s" % ("total ms", "share", "calls", "kernel")]
    for name, (count, total) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append("%9.3f %5.1f%% %6d  %s" % (total, 100 * total / whole, count, name[:160]))
    launches = sum(c for c, _ in totals.values())
    out.append("%9.3f %5.1f%% %6d  (all %d kernels)" % (whole, 100.0, launches, len(totals)))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--skip-launches", type=int, default=0)
    a = ap.parse_args()
    launches = read_launches(open(a.csv, errors="replace").read())[a.skip_launches:]
    if not launches:
        sys.exit("ncu_kernel_table.py: no kernel launches in %s" % a.csv)
    print(table(launches, a.top))


if __name__ == "__main__":
    main()
