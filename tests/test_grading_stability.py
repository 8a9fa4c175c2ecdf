"""Grading is steady under load and agrees with plain nbgrader (light versions of `benchmark`).

The full runs (20 repeats, 8 copies) are `python -m autograder benchmark ...`;
their figures are in course/instructor_guide.md.
"""
from autograder import benchmark

A = "01_processes_threads"


def test_same_score_every_time_with_a_busy_core():
    result = benchmark.stability(A, repeat=3, busy=True)
    assert result["all_graded"]
    assert len(result["distinct_scores"]) == 1 and result["distinct_scores"][0] > 0, result


def test_parallel_grading_agrees_with_plain_nbgrader():
    result = benchmark.compare_with_plain(A, copies=2, n_jobs=2)
    assert result["all_graded"] and result["same_scores"], result
    assert result["ratio"] > 0
