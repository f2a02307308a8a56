"""Choosing llama.cpp's thread count from measured timings (engine.runtime.threads): the
candidates the load leaves, the fewest threads within 5% of the fastest, and the reason shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.runtime.threads import ThreadTiming, candidate_counts, choose, physical_cores


def test_candidates_run_from_one_to_the_cores_the_load_leaves():
    assert candidate_counts(4, 0.3) == [1, 2, 3, 4]  # this process's own load is not the others'
    assert candidate_counts(4, None) == [1, 2, 3, 4]
    assert candidate_counts(4, 2.0) == [1, 2, 3]
    assert candidate_counts(2, 2.4) == [1]
    assert candidate_counts(2, 9.0) == [1]
    assert candidate_counts(1, 0.0) == [1]


def test_the_fastest_mix_wins_and_fewer_threads_win_a_near_tie():
    timings = [ThreadTiming(1, 0.031, 0.30), ThreadTiming(2, 0.024, 0.16), ThreadTiming(3, 0.026, 0.17)]
    chosen = choose(timings, load=0.3, cores=4)
    assert chosen.threads == 2
    assert chosen.reason == ("measured: 1 thread 31 ms/token 300 ms/chunk, 2 threads 24 ms/token 160 ms/chunk, "
                             "3 threads 26 ms/token 170 ms/chunk; 4 cores; load 0.3")
    near = [ThreadTiming(2, 0.0200, 0.200), ThreadTiming(1, 0.0204, 0.204)]  # 2% apart
    assert choose(near).threads == 1 and choose(near).reason.endswith("ms/chunk")
    contended = [ThreadTiming(1, 0.016, 0.34), ThreadTiming(2, 0.024, 0.68)]
    assert choose(contended).threads == 1
    skipped = choose([ThreadTiming(1, 0.014, 0.30), ThreadTiming(2, 0.099, float("inf"))])
    assert skipped.threads == 1 and "2 threads 99 ms/token (chunk not timed)" in skipped.reason
    with pytest.raises(ValueError):
        choose([])


def test_physical_cores_count_smt_siblings_once(tmp_path: Path):
    for cpu, core in enumerate((0, 1, 0, 1)):  # two cores, two threads each
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "core_id").write_text(f"{core}\n")
        (topology / "physical_package_id").write_text("0\n")
    assert physical_cores([0, 1, 2, 3], tmp_path) == 2
    assert physical_cores([0, 2], tmp_path) == 1
    assert physical_cores([0, 1, 7], tmp_path) == 3  # no topology for cpu7: every logical CPU counts
