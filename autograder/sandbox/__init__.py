"""Limits and isolation for everything a submission runs: its kernel and the judge's student process.

Each grading process (nbgrader's kernel, the student's process of the judge) enters the sandbox
first thing, before any student code and before it starts threads:

- **processes**: a cgroup `pids.max` (a fork bomb stops there), else RLIMIT_NPROC,
  set before the drop to the student's uid, where it counts (Linux does not apply it
  to root: a root grader that keeps its uid has no cap, and says so);
- **files' size**: RLIMIT_FSIZE, the largest file a process may write (a write past it
  raises OSError), so that no file of the submission's folder or of the judge's log fills
  the grader's disk;
- **memory**: a cgroup memory limit (the kernel is killed, which grading reports),
  else RLIMIT_AS (allocations fail with MemoryError);
- **files** (needs root, or CAP_SYS_ADMIN): a private mount namespace in which
  every file system is read-only, the course root and the work folder are
  replaced by empty ones into which only an allow-list comes back read-only
  (`helpers/`, `release/`, the environment, the runner), `/tmp`, `/var/tmp` and
  `/dev/shm` are fresh and private, the grader's home is hidden, and only the
  submission's own folder is writable;
- **privileges** (same condition): after the mounts, the process drops to an
  unprivileged uid/gid of its own (one per concurrent submission, so that two
  submissions cannot signal or ptrace each other), with no supplementary
  groups, no capabilities and `PR_SET_NO_NEW_PRIVS`; it can then neither undo
  the mounts nor reach the grader's processes or files;
- **network** (same condition): a new network namespace with only loopback. The
  kernel switches after binding its own sockets to Jupyter, so only the student's
  code is cut off;
- no core dumps.

What could not be applied is written once to stderr (the grading log), never
pretended. Settings come from the COURSE_SANDBOX environment variable (JSON),
written by the grading process (autograder/pipeline/confine.py); see
`limits.Limits` for the defaults.

This package is the code that runs inside a submission's sandbox, and it
imports nothing from the instructor's side of autograder/ (only `course`, for
where things are): `kernel` (nbgrader's kernel for a submission), `student`
(the judge's student's process), `enter` (what both do first), `wire` (the
data that crosses to the judge), `limits` (what the grader asks for), `zygote`
(warm starts: these processes forked from an interpreter that imported the
heavy libraries once; the grader's side of it is autograder/pipeline/warm.py).
"""
