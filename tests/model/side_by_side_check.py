"""Checks two `bench step --side-by-side 4 --json` results: ONE from 2 ranks
held to one core, TWO from 2 ranks on two cores. The medians must be those of
the rounds (exactly). With --bounds, the slowdowns must also be plausible:
two ranks sharing one core run at about half speed each (about 2x), two ranks
on two cores slow each other less than four times. Those bounds are about the
machine, not the code (a CPU burner on core 0 moves them), so only the test
labelled `timing`, which launch/test.sh leaves out, asks for them."""
import json
import statistics as st
import sys

bounds = "--bounds" in sys.argv[1:]
paths = [a for a in sys.argv[1:] if a != "--bounds"]
[one] = [json.loads(l) for l in open(paths[0]) if l.strip()]
[two] = [json.loads(l) for l in open(paths[1]) if l.strip()]
assert one["oversubscribed"], one
if bounds:
    assert 1.2 < one["slowdown_beside"] < 4.0, one
    assert two["slowdown_beside"] < 4.0, two
for j in (one, two):
    a, b = j["rounds_alone_ms"], j["rounds_beside_ms"]
    assert j["side_by_side_rounds"] == 4 and len(a) == 4 and len(b) == 4 and min(a + b) > 0, j
    assert abs(j["slowdown_beside"] - st.median([y / x for x, y in zip(a, b)])) < 1e-9 * j["slowdown_beside"], j
    assert abs(j["step_ms_alone"] - st.median(a)) < 1e-12 + 1e-9 * st.median(a), j
    assert abs(j["step_ms_beside"] - st.median(b)) < 1e-12 + 1e-9 * st.median(b), j
print("PASS: side-by-side medians; slowdown %.2f on one core, %.2f on two"
      % (one["slowdown_beside"], two["slowdown_beside"]))
