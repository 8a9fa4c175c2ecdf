"""The package's layout is its architecture: what runs inside a submission's sandbox
imports nothing from the instructor's side."""
import json
import subprocess
import sys

from autograder import course

SANDBOX_SIDE = ("autograder.sandbox.kernel", "autograder.sandbox.student", "autograder.sandbox.zygote",
                "autograder.hidden")
# What those may load: the sandbox package, the runner, and where things are.
ALLOWED = {"autograder", "autograder.sandbox", "autograder.sandbox.enter", "autograder.sandbox.kernel",
           "autograder.sandbox.limits", "autograder.sandbox.student", "autograder.sandbox.wire",
           "autograder.sandbox.zygote",
           "autograder.hidden", "autograder.course"}


def test_the_sandbox_side_imports_nothing_from_the_instructor_side():
    code = ("import json, sys\n" + "".join(f"import {m}\n" for m in SANDBOX_SIDE)
            + "print(json.dumps(sorted(m for m in sys.modules if m.startswith('autograder'))))")
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=course.ROOT, capture_output=True, text=True,
                         check=True)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert set(SANDBOX_SIDE) <= loaded
    assert loaded <= ALLOWED, f"the sandbox side loads {sorted(loaded - ALLOWED)}"


def test_running_a_check_in_the_sandbox_loads_nothing_from_the_instructor_side():
    """A hidden check run in a kernel (plain nbgrader) goes through hidden's time limit, which
    reads the lease's waits only where the grader loaded the lease."""
    code = ("import json, sys\nfrom autograder import hidden\n"
            "assert hidden._call_with_timeout(lambda: 7, {}, 5) == 7\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('autograder'))))")
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=course.ROOT, capture_output=True, text=True,
                         check=True)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert loaded <= ALLOWED, f"running a check loads {sorted(loaded - ALLOWED)}"


def test_every_verb_is_a_module_of_its_own():
    """The CLI is the map of the code: `python -m autograder <verb>` runs autograder/<verb>(.py|/)."""
    import argparse

    from autograder import cli
    verbs = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"release", "samples", "grade", "feedback", "report", "benchmark"} <= set(verbs)
    import importlib
    for verb, sub in verbs.items():
        fn = sub.get_default("fn")
        module = getattr(fn, "module", fn.__module__)  # cli imports a verb's module when it runs
        expected = "autograder.cli" if verb == "all" else f"autograder.{verb}"
        assert module == expected, f"`{verb}` is run by {module}"
        if hasattr(fn, "module"):
            assert callable(getattr(importlib.import_module(module), fn.function)), f"`{verb}`: no {fn.function}"


def test_a_course_is_where_its_work_goes(tmp_path, monkeypatch):
    """course.Course: the work folder and gradebook are read when a Course is made (never at
    import), travel to grading processes in their environment, and reach nbgrader's config."""
    monkeypatch.delenv("COURSE_DB_URL", raising=False)
    monkeypatch.setenv("COURSE_WORKDIR", str(tmp_path))
    here = course.Course()
    assert here.workdir == tmp_path and here.submitted == tmp_path / "submitted"
    assert here.db_url == f"sqlite:///{tmp_path / 'gradebook.db'}"
    elsewhere = course.Course(tmp_path / "other", "postgresql://grader@db/course")
    env = elsewhere.environment({})
    assert env == {"COURSE_WORKDIR": str(tmp_path / "other"), "COURSE_DB_URL": "postgresql://grader@db/course"}
    assert course.Course(**{"workdir": env["COURSE_WORKDIR"], "db_url": env["COURSE_DB_URL"]}).reports == \
        tmp_path / "other" / "reports"
    config = elsewhere.config(CourseDirectory={"release_directory": str(tmp_path / "r")})
    assert config.CourseDirectory.root == str(tmp_path / "other")
    assert config.CourseDirectory.db_url == "postgresql://grader@db/course"
    assert config.CourseDirectory.release_directory == str(tmp_path / "r")
    assert config.CourseDirectory.source_directory == str(course.SOURCE)


def test_nbgrader_config_loads_the_pipeline_not_the_verbs():
    """nbgrader (in every grading worker) reads nbgrader_config.py: it needs the pipeline's
    preprocessors and where the course is, none of the instructor's verbs."""
    code = ("import json, sys\nfrom autograder import course\ncourse.load_config()\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('autograder'))))")
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=course.ROOT, capture_output=True, text=True,
                         check=True)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert "autograder.pipeline.preprocessors" in loaded
    verbs = {f"autograder.{v}" for v in ("cli", "grade", "feedback", "report", "release", "samples", "site",
                                          "student", "benchmark", "author")}
    assert not loaded & verbs, f"nbgrader_config.py loads {sorted(loaded & verbs)}"


def test_the_cli_imports_a_verb_only_to_run_it():
    """Building the parser imports no verb module: `python -m autograder grade` does not pay for
    jupytext (author), Sphinx (site) or nbformat (samples)."""
    import subprocess
    import sys

    probe = ("import sys; from autograder import cli; cli.parser(); "
             "print(sorted(m for m in ('jupytext', 'nbformat', 'autograder.author', 'autograder.site', "
             "'autograder.samples', 'autograder.benchmark') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=course.ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


# Ways a notebook or a check starts processes by the course's start method (COURSE_START_METHOD).
_STARTS_PROCESSES = r"\b(mp_context|start_method|get_context|Pool|ProcessPoolExecutor|Process\(|num_workers|joblib|" \
                    r"torch\.multiprocessing|Popen|os\.fork|ddp_worker|(pools|workers)\.\w+)\b"


def test_assignments_left_out_of_the_spawn_pass_start_no_process_by_the_start_method():
    """bin/test judges the reference solutions under spawn too, except where that would repeat
    grading's run (autograder/checks START_METHOD_FREE): the cells grading runs and the checks of
    those assignments must stay free of process starts that depend on the start method."""
    import re

    from autograder import notebooks
    from autograder.checks import START_METHOD_FREE
    pattern = re.compile(_STARTS_PROCESSES)
    assert re.search(_STARTS_PROCESSES, "with workers.mp_context().Pool(2) as pool:")  # the pattern bites
    for assignment in START_METHOD_FREE:
        nb = notebooks.read(course.source_notebook(assignment))
        graded = [c.source for c in nb.cells if c.cell_type == "code" and not notebooks.is_demo(c)]
        checks = (course.ROOT / "autograder" / "checks" / f"{assignment}.py").read_text()
        for where, text in [("the notebook", s) for s in graded] + [("its checks", checks)]:
            found = pattern.search(text)
            assert not found, (f"{assignment}: {where} uses {found.group(0)!r}: remove it from START_METHOD_FREE "
                               "so that bin/test judges it under spawn too")


def test_the_main_job_grades_only_the_sample_students(cli_steps):
    """`all` (bin/main) on a live course must not regrade and rewrite the feedback of the class in
    submitted/: its grade and feedback steps get the sample students unless --students says else."""
    from autograder import cli, samples

    seen = cli_steps
    assert cli.main(["all"]) == 0
    assert seen["grade"] == seen["feedback"] == list(samples.STUDENTS), seen
    assert cli.main(["all", "--students", "alice"]) == 0 and seen["grade"] == ["alice"]
