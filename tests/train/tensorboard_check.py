"""Loads the event files written by tensorboard_fixture with the tensorboard
package's own EventAccumulator (which also checks every record's CRCs) and
checks tags, steps and values.

usage: tensorboard_check.py LOGDIR
"""
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing import event_file_loader


def f32(x):
    import struct
    return struct.unpack("<f", struct.pack("<f", x))[0]


def scalars(acc, tag):
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def expect_close(got, want, what):
    if len(got) != len(want):
        raise AssertionError(f"{what}: {len(got)} points, expected {len(want)}: {got}")
    for (gs, gv), (ws, wv) in zip(got, want):
        if gs != ws or not math.isclose(gv, f32(wv), rel_tol=0, abs_tol=0):
            raise AssertionError(f"{what}: got step {gs} value {gv!r}, expected step {ws} value {f32(wv)!r}")


def main():
    logdir = sys.argv[1]

    # The first record of every file is the file_version event.
    for run in ("basic", "resumed"):
        for name in sorted(os.listdir(os.path.join(logdir, run))):
            assert "tfevents" in name and name.endswith(".ringtrain") or ".ringtrain." in name, name
            first = next(iter(event_file_loader.LegacyEventFileLoader(os.path.join(logdir, run, name)).Load()))
            assert first.file_version == "brain.Event:2", first

    acc = event_accumulator.EventAccumulator(os.path.join(logdir, "basic"))
    acc.Reload()
    tags = sorted(acc.Tags()["scalars"])
    assert tags == ["eval/accuracy", "train/loss", "train/lr"], tags
    assert acc.file_version == 2.0, acc.file_version
    expect_close(scalars(acc, "train/loss"), [(s, 2.0 / s) for s in range(1, 21)], "train/loss")
    expect_close(scalars(acc, "train/lr"), [(s, 0.1 * 0.9 ** s) for s in range(1, 21)], "train/lr")
    expect_close(scalars(acc, "eval/accuracy"), [(s, s / 40.0) for s in (5, 10, 15, 20)], "eval/accuracy")
    wall = [e.wall_time for e in acc.Scalars("train/loss")]
    assert all(abs(w - wall[0]) < 600 for w in wall) and wall == sorted(wall), wall

    # After the resume, TensorBoard shows steps 1..6 of the first run and 7..12
    # of the second: nothing the interrupted run logged after its checkpoint.
    acc = event_accumulator.EventAccumulator(os.path.join(logdir, "resumed"))
    acc.Reload()
    want = [(s, 100.0 + s) for s in range(1, 7)] + [(s, 200.0 + s) for s in range(7, 13)]
    expect_close(scalars(acc, "train/loss"), want, "resumed train/loss")

    import tensorboard
    print(f"tensorboard {tensorboard.__version__}: tags, steps and values as written")


if __name__ == "__main__":
    main()
