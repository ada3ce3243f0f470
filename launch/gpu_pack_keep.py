"""Which of a build's test executables a GPU round runs: those that a test
labelled gpu names (its command, its environment) or whose name appears in the
scripts such a test runs, and those that launch/gpu-checks.sh names. Reads
`ctest --show-only=json-v1 -L gpu` on stdin; prints the kept executables'
paths relative to the build, one a line (gpu-pack.sh leaves the others behind).

usage: ctest --show-only=json-v1 -L gpu | python3 gpu_pack_keep.py BUILD ROOT
"""
import json
import os
import re
import sys


def executables(build):
    """{basename: [path relative to build]} of the ELF files under build/tests."""
    found = {}
    for folder, dirs, files in os.walk(os.path.join(build, "tests")):
        # CMake's own files, and the install tests' tree, which never travels
        skip = {"CMakeFiles"} | ({"install"} if folder == os.path.join(build, "tests") else set())
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            path = os.path.join(folder, name)
            if not os.access(path, os.X_OK):
                continue
            with open(path, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
            found.setdefault(name, []).append(os.path.relpath(path, build))
    return found


def main():
    build, root = (os.path.realpath(p) for p in sys.argv[1:3])
    by_name = executables(build)
    tests = json.load(sys.stdin)["tests"]
    words, texts = set(), [os.path.join(root, "launch", "gpu-checks.sh")]
    for t in tests:
        values = list(t.get("command", []))
        for p in t.get("properties", []):
            if p["name"] == "ENVIRONMENT":
                values += [v.split("=", 1)[1] for v in p["value"] if "=" in v]
        for v in values:
            for token in re.split(r"[\s;\"']+", v):
                words.add(os.path.basename(token))
                if token.startswith(root) and os.path.isfile(token) and not token.startswith(build):
                    texts.append(token)  # a script the test runs
    # the scripts' own helpers (lib.sh and the like, beside them)
    for script in list(texts):
        folder = os.path.dirname(script)
        for name in os.listdir(folder):
            if name.endswith(".sh") and name != os.path.basename(script):
                texts.append(os.path.join(folder, name))
    for path in texts:
        try:
            with open(path, errors="replace") as f:
                words.update(re.findall(r"[A-Za-z0-9_.-]+", f.read()))
        except OSError:
            pass
    kept = sorted(p for name, paths in by_name.items() if name in words for p in paths)
    print("\n".join(kept))


if __name__ == "__main__":
    main()
