"""How nbgrader's Autograde reads a submission: a notebook over the size limit is refused
before it is read.

nbgrader reads a notebook whole in the grading worker, outside the sandbox, before any step of
the course runs (a 315 MB notebook of printed output took the worker to 1.24 GB). `grade` leaves
such a submission out before it reaches nbgrader (`jobs.oversized`); this exporter holds the same
limit wherever else nbgrader grades with the course's configuration, formgrader's Autograde button
included, where nbgrader's pre-convert hook cannot stop a submission (it logs the hook's error and
goes on).
"""
import os

from nbconvert.exporters import NotebookExporter

from . import jobs


class NotebookTooLarge(ValueError):
    """nbgrader logs it and fails this submission alone; the rest of the class is graded."""


class SizeLimitedNotebookExporter(NotebookExporter):
    def from_filename(self, filename, resources=None, **kw):
        size = os.stat(filename).st_size
        if size > jobs.notebook_limit_mb() * 2**20:
            raise NotebookTooLarge(f"{filename} was not graded: it {jobs.too_large(size, filename)}")
        return super().from_filename(filename, resources, **kw)
