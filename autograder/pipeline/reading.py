"""How nbgrader's Autograde reads a submission (its exporter, `c.Autograde.exporter_class`).

- A notebook over the size limit is refused before it is read. nbgrader reads a notebook whole in
  the grading worker, outside the sandbox, before any step of the course runs (a 315 MB notebook of
  printed output took the worker to 1.24 GB). `grade` leaves such a submission out before it
  reaches nbgrader (`jobs.oversized`); this holds the same limit wherever else nbgrader grades with
  the course's configuration, formgrader's Autograde button included, where nbgrader's pre-convert
  hook cannot stop a submission (it logs the hook's error and goes on).
- The text is then read by `helpers.notebook_form.read_leniently`, as the students' Validate reads
  it: a notebook another tool saved slightly out of Jupyter's form is read as it was meant, and
  one that would cost nbformat time or memory out of proportion is refused before nbformat reads
  it. What was mended goes to MendCopiedCells, which tells the log and the feedback page.
"""
import os

from nbconvert.exporters import NotebookExporter

from helpers.notebook_form import NotebookTooLargeError, read_leniently

from . import jobs

READ_MENDED = "course_read_mended"  # resources: what reading mended, in plain words (mend.MendCopiedCells says it)


class SubmissionExporter(NotebookExporter):
    def from_filename(self, filename, resources=None, **kw):
        size = os.stat(filename).st_size
        if size > jobs.notebook_limit_mb() * 2**20:
            raise NotebookTooLargeError(f"{filename} was not graded: it {jobs.too_large(size, filename)}")
        return super().from_filename(filename, resources, **kw)

    def from_file(self, file_stream, resources=None, **kw):
        nb, said = read_leniently(file_stream.read())
        resources = {} if resources is None else resources
        resources[READ_MENDED] = said
        return self.from_notebook_node(nb, resources=resources, **kw)
