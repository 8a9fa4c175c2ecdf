"""nbgrader configuration of the course (the repository root is the course root).

Grading-specific steps are small nbgrader preprocessors from `autograder.pipeline`,
plugged in here through traitlets rather than wrapped in scripts.
"""
import os

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

from autograder.course import Course  # noqa: E402

# Where submissions, grades, feedback and the gradebook live: the course root and
# gradebook.db there, unless COURSE_WORKDIR / COURSE_DB_URL say otherwise (tests grade
# in a temp folder; for a class of hundreds, COURSE_DB_URL=postgresql+psycopg://grader@dbhost/
# parallel_course, see course/instructor_guide.md). autograder.course.Course decides.
WORK = Course()

c.CourseDirectory.course_id = "parallel-python-pytorch"
c.CourseDirectory.root = str(WORK.workdir)
c.CourseDirectory.source_directory = str(WORK.root / "source")
c.CourseDirectory.release_directory = str(WORK.root / "release")
c.CourseDirectory.db_url = WORK.db_url
# nbgrader's exchange on a JupyterHub (course/instructor_guide.md): the folder the administrator
# made, for release_assignment, collect and release_feedback alike (the student folder's config
# names the same one); COURSE_EXCHANGE names another.
c.Exchange.root = os.environ.get("COURSE_EXCHANGE", "/srv/nbgrader/exchange")
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".pytest_cache"]

# What students see in place of a solution.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# A deleted test cell is put back from the gradebook, not silently dropped.
c.OverwriteCells.add_missing_cells = True

# Execution limits while grading (seconds). COURSE_CELL_TIMEOUT and
# COURSE_NOTEBOOK_TIMEOUT override them (see course/instructor_guide.md).
c.Execute.timeout = int(os.environ.get("COURSE_CELL_TIMEOUT", "180"))
c.VerifyHiddenChecks.cell_timeout = c.Execute.timeout
# The judge runs beside the kernel, except for a submission graded again alone (a check
# that could not decide on a busy machine): then it waits for the kernel.
c.StartJudge.enabled = os.environ.get("COURSE_GRADE_ALONE", "") != "1"
c.Execute.interrupt_on_timeout = True
# Teaching demos (measurements, plots) grade nothing: grading skips cells tagged `demo`.
c.Execute.skip_cells_with_tag = "demo"
if "COURSE_NOTEBOOK_TIMEOUT" in os.environ:  # default: ResilientExecute.notebook_timeout
    c.ResilientExecute.notebook_timeout = int(os.environ["COURSE_NOTEBOOK_TIMEOUT"])
    # The judge's replay of the notebook has the kernel's limit for the whole notebook too.
    c.VerifyHiddenChecks.notebook_timeout = c.ResilientExecute.notebook_timeout
# Per-submission sandbox (autograder/sandbox/, set up by autograder/pipeline/confine.py): memory and process caps,
# no network, private files. COURSE_SANDBOX_OFF=1 switches it off (debugging only).
c.GradingLimits.enabled = os.environ.get("COURSE_SANDBOX_OFF", "") != "1"
# Defaults: autograder.sandbox.limits.Limits.
if "COURSE_MEMORY_MB" in os.environ:
    c.GradingLimits.memory_mb = int(os.environ["COURSE_MEMORY_MB"])
if "COURSE_MAX_PROCESSES" in os.environ:
    c.GradingLimits.max_processes = int(os.environ["COURSE_MAX_PROCESSES"])
if "COURSE_MAX_FILE_MB" in os.environ:
    c.GradingLimits.max_file_mb = int(os.environ["COURSE_MAX_FILE_MB"])
# Student code sees the grader's GPUs only if asked (and only where a memory cgroup caps memory).
if "COURSE_GRADING_GPUS" in os.environ:
    c.GradingLimits.gpus = os.environ["COURSE_GRADING_GPUS"] == "1"

from autograder.pipeline.preprocessors import (  # noqa: E402
    KeepExpectedFiles, OverwriteCellsAsReleased, RecordTimings, ResilientExecute, SanitizeStudentHTML,
    StartJudge, StderrToStdout, VerifyHiddenChecks,
)
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, ClearOutput, LimitOutput, OverwriteKernelspec, SaveAutoGrades,
)

from autograder.pipeline.mend import MendCopiedCells, RunNeededDemos  # noqa: E402
from autograder.pipeline.reading import SubmissionExporter  # noqa: E402

# A notebook over COURSE_MAX_NOTEBOOK_MB is refused before nbgrader reads it (formgrader's Autograde
# button too; `grade` leaves it out before it gets here); one with a byte-order mark or cells without
# metadata is read as meant.
c.Autograde.exporter_class = SubmissionExporter
# nbgrader's own, but for two: its DeduplicateIds left copied cells that failed the whole submission,
# and its OverwriteCells raised a checksum alarm for every test cell with hidden tests; and a step
# that runs the demo cells the graded code needs.
c.Autograde.sanitize_preprocessors = [ClearOutput, MendCopiedCells, OverwriteKernelspec,
                                      OverwriteCellsAsReleased, RunNeededDemos, CheckCellMetadata]
c.Autograde.autograde_preprocessors = [
    KeepExpectedFiles,  # nothing handed in beside the notebook but what the release has
    StartJudge,         # the hidden checks' judge starts now and runs beside the kernel
    ResilientExecute,   # a dead or hung kernel keeps the scores of the cells that ran
    StderrToStdout,     # a warning on stderr must not zero a passing test cell
    VerifyHiddenChecks, # the judge's verdicts: a test cell needs them and its visible tests
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
    SanitizeStudentHTML,  # no script of the student's runs in formgrader or the feedback pages
    RecordTimings,      # where the time went, for `python -m autograder benchmark`
]

# Feedback: hidden blocks are cut from the test cells shown to students; the
# failure messages of the hidden checks (plain words, no code) stay.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import ClearHiddenTests, GetGrades  # noqa: E402

from autograder.pipeline.feedback_page import FeedbackSummary  # noqa: E402
from autograder.pipeline.preprocessors import HideHiddenTraceback  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, HideHiddenTraceback,
                                    FeedbackSummary,  # each exercise's points and what happened, on top
                                    CSSHTMLHeaderPreprocessor]
# The page: nbgrader's feedback template, with one <body> (autograder/pipeline/feedback_page.html.j2;
# nbconvert puts a template file's folder on its path). Set for the feedback step only:
# formgrader's pages are HTMLExporter's too, from a template of their own.
from autograder.course import ROOT  # noqa: E402

c.GenerateFeedback.HTMLExporter.template_file = str(ROOT / "autograder" / "pipeline" / "feedback_page.html.j2")

# Late submissions (the exchange stamps each one; the due date is the assignment's in
# the gradebook): COURSE_LATE_PENALTY=zero gives a late submission no points; the
# default, "none", only marks it late.
c.LateSubmissionPlugin.penalty_method = os.environ.get("COURSE_LATE_PENALTY", "none")
