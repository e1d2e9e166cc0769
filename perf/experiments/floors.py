"""floors.py: is the `no delay` (transport direct) baseline slower than a run it is meant to bound?

The study divides by the direct run, so direct must be a floor: never slower than the ICCS beyond
noise. The rule (the same as perf/floor_check.hpp, which `bench dsm` uses), on the per-run times of
each side (interleaved runs, lower is better): direct's median exceeds the other's by more than
`tolerance` (10%) AND direct's best run is slower than the other's best run, so one noisy run on
either side does not raise the flag.
"""
from statistics import median

FLOOR_TOLERANCE = 0.10


def floor_broken(direct, other, tolerance=FLOOR_TOLERANCE):
    """True when `direct` (per-run times) is slower than `other` beyond noise; False if either is empty."""
    direct, other = list(direct), list(other)
    if not direct or not other:
        return False
    return median(direct) > (1 + tolerance) * median(other) and min(direct) > min(other)
