"""`feedback`: HTML feedback per student and assignment, hidden tests' code left out."""
import os
import re

from nbgrader.preprocessors import NbGraderPreprocessor

from . import course
from .pipeline import jobs

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class HideHiddenTraceback(NbGraderPreprocessor):
    """Cut hidden-test lines out of the tracebacks shown in feedback.

    nbgrader's ClearHiddenTests removes the hidden block from a cell's source,
    but IPython's traceback of a failing test cell quotes the lines around the
    failure, hidden ones included. The failure message itself stays.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    output.traceback = [self._scrub(frame) for frame in output.traceback
                                        if not self._is_grader_frame(frame)]
        return cell, resources

    @staticmethod
    def _is_grader_frame(frame):
        """A traceback entry inside the course's grading code (the hidden-check runner)."""
        plain = _ANSI.sub("", frame).lstrip()
        return plain.startswith("File ") and f"{os.sep}autograder{os.sep}" in plain.split("\n", 1)[0]

    @staticmethod
    def _scrub(frame):
        kept, hiding = [], False
        for line in frame.split("\n"):
            plain = _ANSI.sub("", line)
            if "### BEGIN HIDDEN TESTS" in plain:
                hiding = True
            if not hiding:
                kept.append(line)
            if "### END HIDDEN TESTS" in plain:
                hiding = False
        return "\n".join(kept)


def generate(assignments=None, students=None, n_jobs=None, scheduler=None):
    pairs = [(a, s) for a, s in jobs.submitted_pairs(assignments, students, root=course.Course().autograded)]
    return jobs.run_all("generate_feedback", pairs, n_jobs=n_jobs, desc="feedback", scheduler=scheduler)


def main(args):
    results = generate(args.assignments or None, args.students or None, args.jobs,
                       getattr(args, "scheduler", None))
    failed = [r for r in results if not r.ok]
    print(f"feedback: {len(results) - len(failed)} files in {course.Course().feedback}")
    return 1 if failed else 0
