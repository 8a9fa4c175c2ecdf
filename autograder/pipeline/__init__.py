"""Grading, on the grader's side of the process boundary (it runs as the instructor).

- `jobs`, `worker`, `cluster`: one nbgrader `autograde` per submission, several at
  a time, on this machine or a Dask cluster's workers;
- `preprocessors`: the course's nbgrader preprocessors (configured through
  traitlets in nbgrader_config.py): the sandboxed kernel, dead-kernel
  handling, the judge's verdicts, timings, and hidden lines cut out of the
  feedback's tracebacks;
- `feedback_page`: what a feedback page adds to nbgrader's: the results table on
  top (each exercise's points and what happened) and outputs that fit the page;
- `confine`: the grader's side of a submission's sandbox (cgroups, uid, what
  the submission may see); the other side is autograder/sandbox/;
- `verify`: what the student's process replays, and starting judges until
  every exercise has a verdict;
- `warm`: the worker's zygotes (autograder/sandbox/zygote.py), which fork
  kernels, student's processes and judges with the heavy imports done;
- `judge`: the process that runs the hidden checks and makes the verdicts; it
  runs no student code.
"""
