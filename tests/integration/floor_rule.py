#!/usr/bin/env python3
"""The floor rule of `experiment apps` (perf/experiments/floors.py) on given numbers: the same cases
as tests/unit/test_floor.cpp, so the Python rule and bench dsm's C++ one (perf/floor_check.hpp)
stay the same rule."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "perf", "experiments"))
from floors import floor_broken  # noqa: E402

CASES = [
    (([1.31, 1.35, 1.41, 1.38, 1.33], [0.92, 1.04, 0.98, 1.00, 0.95]), {}, True),  # the Jacobi
    (([29.0, 28.1, 30.0], [73.4, 76.8, 85.1]), {}, False),  # direct faster
    (([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]), {}, False),  # equal
    (([1.09, 1.08, 1.10], [1.0, 1.0, 1.0]), {}, False),  # within 10%: noise
    (([1.12, 1.15, 1.20], [1.0, 1.0, 1.0]), {}, True),
    (([0.90, 1.50, 1.60], [1.0, 1.1, 1.2]), {}, False),  # direct's best run beats iccs's best
    (([1.5], [1.0]), {}, True),  # one run each: the median rule alone
    (([1.06, 1.06, 1.07], [1.0, 1.0, 1.0]), {"tolerance": 0.05}, True),
    (([], [1.0]), {}, False),
    (([1.0], []), {}, False),
]

bad = 0
for (d, o), kw, want in CASES:
    got = floor_broken(d, o, **kw)
    if got != want:
        print(f"FAIL: floor_broken({d}, {o}, {kw}) = {got}, want {want}")
        bad += 1
print(f"{len(CASES) - bad} passed, {bad} failed")
sys.exit(1 if bad else 0)
