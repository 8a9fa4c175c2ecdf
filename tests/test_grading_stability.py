"""Grading is steady under load (a light version of `benchmark --repeat`).

The full run (20 repeats) is `python -m autograder benchmark --repeat 20 --busy`; its
figures are in course/instructor_guide.md. It needs the machine to itself (bin/test's part 3):
01's speed-up checks must decide with one core kept busy, and no more.
"""
import pytest

from autograder import benchmark

A = "01_processes_threads"


def test_same_full_score_every_time_with_a_busy_core():
    result = benchmark.stability([A], repeat=3, busy=True)
    assert result["all_graded"]
    assert result["lost_decided"] == [], result  # no check decided against the reference
    if result["undecided"]:  # scored zero and listed for a person: the test learns nothing more
        pytest.skip(f"{result['undecided']} of 3 gradings had a check undecided on this machine now, twice")
    assert result["distinct_scores"][A] == [result["maxima"][A]], result
    assert result["per_assignment"][A]["kernel start"] > 0, result["per_assignment"]

    # The submissions graded again alone include every one still undecided after that.
    assert 0 <= result["undecided"] <= result["regraded"] <= 3, result
