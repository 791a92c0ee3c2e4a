"""Ratios of two peers' timings on a machine whose speed drifts.

On the project's shared 2-vCPU VMs the same binary runs 20-40% slower for
seconds at a time (other tenants; bench/README.md, "Paired ratios"). A
ratio of two medians taken over a whole run then still moves by that much
whenever the slow seconds fall on one peer's blocks more than on the
other's. Timing both peers back to back in each repetition and taking the
median of the per-repetition ratios compares them under the same
conditions: the drift is slow next to one pair of blocks, so it cancels in
each pair's ratio.
"""
from __future__ import annotations

import statistics


def paired_ratio(peer_times, ipuxl_times) -> float:
    """Median over repetitions of peer time / ipuxl time (above 1: ipuxl
    faster). The two lists hold one timing per repetition, taken back to
    back in the same repetition."""
    if len(peer_times) != len(ipuxl_times) or not peer_times:
        raise ValueError("paired_ratio needs one timing of each peer per repetition")
    return statistics.median(p / i for p, i in zip(peer_times, ipuxl_times))
