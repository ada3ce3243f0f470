#!/usr/bin/env python3
"""Sort the failures of a `ctest --output-on-failure` log into those that the
host's environment explains and the rest.

Used by launch/gpu-checks.sh's cpusuite step: the GPU host runs the CPU suite
from a bundle (launch/gpu-pack.sh) and lacks some of what CI installs (Python's
h5py and PIL, gnuplot, CMake itself). A test that fails for that reason says
nothing about ringtrain, and one that fails for any other reason must not hide
among them. Prints one line per failed test, "host <test>: <reason>" or
"other <test>", then a summary line; exits 0 if every failure is the host's.

usage: ctest_host_failures.py CTEST_LOG
"""
import re
import sys

# (what the output shows, what the host lacks)
HOST_CAUSES = [
    (re.compile(r"ModuleNotFoundError: No module named '(\w+)'"), "Python module {0}"),
    (re.compile(r"gnuplot is not installed"), "gnuplot"),
    (re.compile(r"(\S*cmake): No such file or directory"), "cmake at {0}"),
    (re.compile(r"Unable to find executable: (\S+)"), "{0}"),
    (re.compile(r"Not a file: \S*cmake_install\.cmake"), "the build's install scripts"),
    # files that CMake writes at configure time; the bundle carries executables
    (re.compile(r"'(\S*/build/tests/\S+\.txt)' cannot be read"), "{0}, written at configure time"),
    (re.compile(r"error while loading shared libraries: (\S+):"),
     "{0} outside the bundle's LD_LIBRARY_PATH (a test that changes user)"),
    (re.compile(r"pmix_mca_base_component_repository_open"),
     "Open MPI's PMIx plugins of another version (warnings on stderr)"),
]
# the status is whatever stands between the dots and the time: "Passed",
# "***Failed  Required regular expression not found. Regex=[...]",
# "***Exception: SegFault", "Subprocess aborted***Exception: Child aborted"
RESULT = re.compile(r"^\s*\d+/\d+ Test\s+#(\d+): (\S+) \.*\s*(.*?)\s+[\d.]+ sec\s*$")


def status_of(m):
    return m.group(3).strip("* ")
TALLY = re.compile(r"tests passed, (\d+) tests failed out of")
DEPENDS = re.compile(r"^Failed test dependencies: (.+)$")


def blocks(lines):
    """(name, status, output lines) per test: what ctest printed after the
    test's result line (its own output on failure) and, for a test not run,
    what it printed just before (why it could not start it)."""
    current = None
    before = []
    for line in lines:
        m = RESULT.match(line)
        if m:
            if current:
                yield current
            status = status_of(m)
            current = (m.group(2), status, list(before) if status == "Not Run" else [])
            before = []
        elif line.lstrip().startswith("Start "):
            before = []
        else:
            before.append(line)
            if current:
                current[2].append(line)
    if current:
        yield current


def main(path):
    lines = open(path, errors="replace").read().splitlines()
    # "Failed test dependencies: X" precedes the Not Run line of its test
    not_run_cause = {}
    pending = None
    for line in lines:
        d = DEPENDS.match(line.strip())
        if d:
            pending = d.group(1).split()
            continue
        m = RESULT.match(line)
        if m and pending is not None:
            if status_of(m) == "Not Run":
                not_run_cause[m.group(2)] = pending
            pending = None
    verdict = {}
    for name, status, output in blocks(lines):
        if status in ("Passed", "Skipped"):
            continue
        text = "\n".join(output)
        reasons = []
        for pattern, what in HOST_CAUSES:
            for m in pattern.finditer(text):
                r = what.format(*m.groups())
                if r not in reasons:
                    reasons.append(r)
        verdict[name] = (status, reasons)
    # a test not run because a fixture failed for the host's reasons is the host's too
    for name, deps in not_run_cause.items():
        if name in verdict and all(verdict.get(d, ("", []))[1] for d in deps):
            verdict[name] = (verdict[name][0], ["its fixture " + ", ".join(deps) + " (the host)"])
    # PMIx's warnings are noted but explain nothing alone: a test that compares
    # output verbatim fails on them, and so would one with a real fault
    others = []
    for name, (status, reasons) in verdict.items():
        if [r for r in reasons if not r.startswith("Open MPI's PMIx")]:
            print(f"host {name}: {'; '.join(reasons)}")
        else:
            others.append(name)
            print(f"other {name} ({status}){': ' + reasons[0] if reasons else ''}")
    print(f"{len(verdict)} failed: {len(verdict) - len(others)} for what the host lacks, "
          f"{len(others)} other{': ' + ' '.join(others) if others else ''}")
    # ctest's own tally: absent (ctest was cut off) or counting failures that
    # no result line above showed, the run is not the host's fault alone
    tally = [int(m.group(1)) for m in map(TALLY.search, lines) if m]
    if not tally:
        print("no ctest tally in the log: ctest did not finish")
        return 1
    if tally[-1] > len(verdict):
        print(f"ctest counted {tally[-1]} failures, {len(verdict)} of them read above")
        return 1
    return 1 if others else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
