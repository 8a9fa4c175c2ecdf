"""Grading is steady under load and agrees with plain nbgrader (light versions of `benchmark`).

The full runs (20 repeats, 8 copies) are `python -m autograder benchmark ...`;
their figures are in course/instructor_guide.md.
"""
from autograder import benchmark

A = "01_processes_threads"


def test_same_full_score_every_time_with_a_busy_core():
    result = benchmark.stability([A], repeat=3, busy=True)
    assert result["all_graded"]
    assert result["distinct_scores"][A] == [result["maxima"][A]], result
    assert result["per_assignment"][A]["kernel start"] > 0, result["per_assignment"]


def test_benchmark_against_plain_nbgrader():
    result = benchmark.compare_with_plain([A], copies=1, n_jobs=2)
    assert result["all_graded"] and result["full_marks"], result
    assert result["plain_scores"] == result["scores"], "plain nbgrader and grade disagree on the reference"
    assert 0 < result["busy_cores"] <= 1.05 and result["ratio"] > 0, result
    assert set(benchmark.PARTS) <= set(result["breakdown"]), result["breakdown"]
    assert all(seconds > 0 for part, seconds in result["breakdown"].items()
               if part in ("kernel start", "hidden checks (judge)")), result["breakdown"]
