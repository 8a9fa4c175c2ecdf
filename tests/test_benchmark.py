"""`python -m autograder benchmark` against plain nbgrader, a light version of it.

On 10, whose checks time nothing: plain nbgrader runs the hidden checks in its kernel,
outside the lease on the machine, so a speed-up check there could be disturbed by the
tests beside it (bin/test runs this one in part 2, after the checks' pass under spawn).
The full run (every assignment, 8 copies) is `python -m autograder benchmark --copies 8`;
its figures are in course/instructor_guide.md.
"""
import inspect

import pytest

from autograder import benchmark, hidden

A = "10_model_pipeline_parallel"


def test_the_assignment_times_nothing():
    source = inspect.getsource(hidden.load_checks(A))
    assert not any(word in source for word in ("alone(", "exclusive", "perf_counter", "observe(")), (
        f"{A}'s checks measure time: pick an assignment whose checks do not")


def test_benchmark_against_plain_nbgrader(capsys):
    result = benchmark.compare_with_plain([A], copies=1, n_jobs=2)
    assert result["all_graded"] and result["full_marks"], result
    assert result["plain_scores"] == result["scores"], "plain nbgrader and grade disagree on the reference"
    assert 0 < result["busy_cores"] <= 1.05 and result["ratio"] > 0, result
    assert set(benchmark.PARTS) <= set(result["breakdown"]), result["breakdown"]
    assert all(seconds > 0 for part, seconds in result["breakdown"].items()
               if part in ("kernel start", "hidden checks (judge)")), result["breakdown"]
    # Per assignment: the job's whole time holds its parts (the judge's runs beside them).
    row = result["per_assignment"][A]
    assert row[benchmark.WHOLE] >= sum(row[p] for p in benchmark.PARTS) > 0, row
    benchmark._print_per_assignment(result["per_assignment"])
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1].split("|")[0].strip() == A and len(printed[-1].split("|")) == 2 + len(benchmark.PARTS) + 1, printed


def test_pace_is_the_childs_own_cpu_time():
    """The pace counts the probe's CPU time, which a busy machine does not stretch: a probe with
    about a second of work costs far more than an empty one; a failing probe is an error, not a pace."""
    empty = benchmark.pace("pass", tries=1)
    busy = benchmark.pace("sum(range(30_000_000))", tries=1)
    assert 0 < empty < busy / 5, (empty, busy)
    with pytest.raises(RuntimeError, match="failed"):
        benchmark.pace("raise SystemExit(3)", tries=1)
