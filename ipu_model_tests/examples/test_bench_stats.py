"""bench/_stats.py: the paired ratio the benchmarks report."""
import pytest

from repo_modules import load

paired_ratio = load("bench/_stats.py").paired_ratio


def test_paired_ratio_cancels_a_drift_shared_by_each_pair():
    # The machine runs 1x, 1.5x, 3x slower in turns; the peer is always 1.25x
    # ipuxl's time within a repetition, except one disturbed repetition.
    drift = [1.0, 1.5, 3.0, 1.0, 1.5, 3.0, 1.0]
    ipuxl = [d * 2.0 for d in drift]
    peer = [d * 2.5 for d in drift]
    peer[2] *= 0.5  # a disturbance in one repetition only
    assert paired_ratio(peer, ipuxl) == pytest.approx(1.25)


def test_paired_ratio_is_peer_over_ipuxl_and_needs_pairs():
    assert paired_ratio([3.0], [1.5]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="one timing of each peer"):
        paired_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="one timing of each peer"):
        paired_ratio([], [])
