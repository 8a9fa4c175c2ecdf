"""A long-lived nbgrader worker: one per parallel job, many submissions each.

Started by autograder/pipeline/jobs.py as `python -m autograder.pipeline.worker <verb>`. It loads
nbgrader and the course config once, then reads `assignment student` lines on
stdin, runs nbgrader's own API call for each (autograde or generate_feedback),
writes the call's log to the given folder and answers one JSON line on stdout.
Starting nbgrader costs about 3 s; paying it once per worker instead of once
per submission is most of what makes parallel grading pay.
"""
import json
import os
import sys
import threading
import time
from pathlib import Path


def _exit_with_parent(interval=0.5):
    """Exit as soon as the process that started this worker is gone.

    A grading job killed mid-submission (a Dask worker that dies, a killed
    `grade`) leaves this process orphaned in the middle of an autograde; the
    submission is graded again elsewhere, so this one must stop writing to the
    gradebook and the autograded folder at once, and leave nothing in the temp folder.
    """
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(interval)
        _remove_what_this_grading_leaves()
        os._exit(3)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _remove_what_this_grading_leaves():
    """What a grading stopped in the middle would leave in the temp folder for good: its kernels'
    connection files (each with its kernel's key; jupyter_client removes them at a normal end) and
    its judges' copies of the student's files (kept 6 hours otherwise: remove_orphaned_copies), as
    jobs.stop_workers removes them for a worker that `grade` stops itself."""
    import shutil
    import tempfile
    from .jobs import connection_files
    from .preprocessors import COPY_PREFIX
    for path in connection_files([os.getpid()]):
        Path(path).unlink(missing_ok=True)
    for copy in Path(tempfile.gettempdir()).glob(f"{COPY_PREFIX}{os.getpid()}-*"):
        if not copy.is_symlink():
            shutil.rmtree(copy, ignore_errors=True)


def main():
    verb, log_dir = sys.argv[1], Path(sys.argv[2])
    _exit_with_parent()
    from ..deferred_imports import defer_iri_parser
    defer_iri_parser()  # before nbgrader imports nbformat
    from .. import course
    from .preprocessors import finish_abandoned_judges
    api = course.Course().api(Application={"log_level": "INFO"})
    call = {"autograde": api.autograde, "generate_feedback": api.generate_feedback}[verb]
    # The answers get a descriptor of their own; descriptor 1 becomes the log, so that what
    # nbgrader prints, and what the kernels and judges started from here write to the
    # descriptor 1 they inherit (student code included), can never pass for an answer.
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        assignment, student = line.split()
        start = time.perf_counter()
        try:
            result = call(assignment, student, force=True)
        except Exception as err:  # noqa: BLE001 (reported as this submission's failure)
            result = {"success": False, "log": "", "error": repr(err)}
        finish_abandoned_judges()
        log = log_dir / f"{verb}-{student}-{assignment}.log"
        log.write_text((result.get("log") or "") + ("\n" + result["error"] if result.get("error") else ""))
        answer.write(json.dumps({"ok": bool(result["success"]), "seconds": time.perf_counter() - start,
                                 "log": str(log)}) + "\n")
        answer.flush()


if __name__ == "__main__":
    main()
