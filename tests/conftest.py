"""Shared fixtures: the assignments present, and temporary course work folders to grade in."""
import contextlib
import os
import shutil
import time
from pathlib import Path

from autograder.deferred_imports import defer_iri_parser

defer_iri_parser()  # before nbformat: its IRI parser is built on first use only
import nbformat  # noqa: E402
import pytest

from autograder import course, gradebook, release, samples
from autograder.grade import autograde
from autograder.pipeline import jobs
from autograder.samples.judging import Judge

ASSIGNMENTS = course.assignments()

# bin/test runs the suite in three parts (see there): most tests side by side, then the tests
# that grade (side by side too, their timing checks sharing one lease on the machine), then
# the few that measure the machine and need it to themselves.
GRADING_MODULES = {"test_grading", "test_timing_exercises", "test_report", "test_postgres", "test_dask_cluster",
                   "test_grading_trust", "test_exchange"}
ALONE_MODULES = {"test_grading_stability", "test_decided_alone"}
# Grading that need not wait for the shared graded course: beside it, after the checks' pass under spawn.
BESIDE_MODULES = {"test_benchmark"}


@contextlib.contextmanager
def beside_timing_checks():
    """For the block, hold the test run's lease on the machine shared, as grading's own cells do
    (autograder/pipeline/lease.py): a timing check that wants the machine alone then waits for
    this short piece of work (a release, a command line that grades nothing: a few seconds)
    instead of measuring beside it. Seen without it: nbgrader's and alembic's processes of the
    exchange and PostgreSQL tests took a core through 02's GIL experiment, which could then not
    decide. Never around work that grades (its checks would wait for this very hold), nor around
    many commands in a row (each waits behind every check that takes the machine alone)."""
    from autograder.pipeline import lease
    with lease.hold():
        yield


def pytest_configure(config):
    """One lease on the machine for the whole run, all its pytest-xdist workers included
    (autograder/pipeline/lease.py): the timing checks of every grading run and of the
    catalogue take the machine alone in turn."""
    from autograder.pipeline import lease
    if os.environ.get(lease.ENV) or hasattr(config, "workerinput"):
        return
    import tempfile
    folder = tempfile.mkdtemp(prefix="course-test-lease-")
    os.environ[lease.ENV] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


# The longest scopes (a module, or a catalogue class) first, in the order of their measured
# time on 2 cores, so that no long one starts last and runs alone at the end; bin/test keeps
# this order with --no-loadscope-reorder (pytest-xdist would otherwise start the scopes with
# the most tests first). The grading part: the shared graded course first, then what does not
# read it, then what waits for it.
LONGEST_FIRST = ["test_browser", "test_site", "test_grading_unprivileged", "test_manual_review", "TestCatalogue_02_gil", "TestCatalogue_11_profiling_scaling",
                 "TestCatalogue_09_data_parallel", "test_visible_tests", "TestCatalogue_04_rng_reproducibility",
                 "test_verify", "TestCatalogue_05_multiprocessing_pools", "TestCatalogue_06_joblib_vectorization",
                 "test_ranks", "test_lease", "test_torchrun", "test_stall_watch", "test_hidden_runner", "TestCatalogue_12_collectives_sharding",
                 "TestCatalogue_03_race_conditions", "test_docs",
                 "test_grading", "test_grading_trust", "test_exchange", "test_postgres", "test_dask_cluster"]


def _scope_rank(item):
    module = item.module.__name__.rsplit(".", 1)[-1]
    for name in (getattr(item.cls, "__name__", None), module):
        if name in LONGEST_FIRST:
            return LONGEST_FIRST.index(name)
    return len(LONGEST_FIRST)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark each test with its part of the run, and put the longest scopes first. (bin/test
    spreads tests over pytest-xdist workers with `--dist loadscope`: a module, or a class,
    stays on one worker, so that its fixtures are made once; the graded course is shared
    between workers, see below.)"""
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        if module in ALONE_MODULES:
            item.add_marker(pytest.mark.alone)
        elif module in BESIDE_MODULES:
            item.add_marker(pytest.mark.beside)
        elif module in GRADING_MODULES:
            item.add_marker(pytest.mark.grading)
    items.sort(key=_scope_rank)  # stable: the rest keep their order


def pytest_generate_tests(metafunc):
    explicit = any("assignment" in m.args[0] for m in metafunc.definition.iter_markers("parametrize"))
    if "assignment" in metafunc.fixturenames and not explicit:
        metafunc.parametrize("assignment", ASSIGNMENTS)


class GradingWorkdir:
    """A throw-away course work folder (submitted/, autograded/, gradebook) for tests."""

    def __init__(self, path, assignments, released=False):
        self.path = Path(path)
        self.course = course.Course(self.path, f"sqlite:///{self.path / 'gradebook.db'}")
        self.assignments = assignments
        if not released:
            with beside_timing_checks():
                release.generate(assignments, release_dir=self.path / "release-check", work=self.course)

    def submit(self, student, assignment, nb_or_folder):
        folder = self.path / "submitted" / student / assignment
        if folder.exists():
            shutil.rmtree(folder)
        if isinstance(nb_or_folder, (str, Path)):
            shutil.copytree(nb_or_folder, folder, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
        else:
            shutil.copytree(course.RELEASE / assignment, folder, ignore=shutil.ignore_patterns("*.ipynb"))
            nbformat.write(nb_or_folder, str(folder / f"{assignment}.ipynb"))
        return folder

    def grade(self, students=None, env=None):
        """Autograde the submissions (all, or these students) as `python -m autograder grade`
        does: in parallel, then the undecided ones alone; list of JobResults."""
        pairs = jobs.submitted_pairs(self.assignments, students, root=self.course.submitted)
        with pytest.MonkeyPatch.context() as mp:
            for key, value in (env or {}).items():
                mp.setenv(key, value)
            results, self.undecided = autograde(pairs, work=self.course)
            return results

    def scores(self):
        return gradebook.cell_scores(work=self.course)

    def total(self, student, assignment):
        rows = [r for r in self.scores() if r["student"] == student and r["assignment"] == assignment]
        return sum(r["score"] for r in rows), sum(r["max_score"] for r in rows)

    def graded_notebook(self, student, assignment):
        return nbformat.read(str(self.path / "autograded" / student / assignment / f"{assignment}.ipynb"), 4)


@pytest.fixture(scope="session")
def workdir_factory(tmp_path_factory):
    def make(name, assignments=None):
        return GradingWorkdir(tmp_path_factory.mktemp(name), assignments or ASSIGNMENTS)
    return make


# ---------------------------------------------------------------------------
# One graded course per pytest run, shared by every test that reads grades
# (test_grading, test_timing_exercises, test_report, the PostgreSQL and Dask
# baselines): every submission is graded once, in one `grade` call, as
# `python -m autograder grade` does (in parallel, then the undecided ones alone).

def pytest_collection_finish(session):
    """The assignments the shared graded course needs: those of the selected tests that use it
    (`-k 05` grades 05 only); a test with no `assignment` parameter needs its module's
    GRADED_ASSIGNMENTS, or every assignment. A module with GRADED_ASSIGNMENTS may also ask for
    the course only when it needs it (request.getfixturevalue), after its own work."""
    wanted = set()
    for item in session.items:
        if ("graded_course" not in getattr(item, "fixturenames", ())
                and not hasattr(getattr(item, "module", None), "GRADED_ASSIGNMENTS")):
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "assignment" in params:
            wanted.add(params["assignment"])
        else:
            wanted.update(getattr(item.module, "GRADED_ASSIGNMENTS", ASSIGNMENTS))
    session.config.graded_assignments = [a for a in ASSIGNMENTS if a in wanted]


@pytest.fixture(scope="session")
def graded_course(request, tmp_path_factory):
    """{"work", "results", "rows", "assignments"}: the sample students (perfect, blank, partial)
    of every needed assignment and the students of samples.SERIALISED, graded once for the run:
    with pytest-xdist, the first worker that needs it grades it and the others wait for it
    (a lock beside the workers' own temp folders)."""
    import fcntl
    import pickle

    assignments = getattr(request.config, "graded_assignments", None) or ASSIGNMENTS
    shared = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):
        shared = shared.parent  # one folder above every worker's own
    folder, done = shared / "graded-course", shared / "graded-course.pickle"
    with open(shared / "graded-course.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            results, undecided = pickle.loads(done.read_bytes())
            work = GradingWorkdir(folder, assignments, released=True)
            work.undecided = undecided
        else:
            shutil.rmtree(folder, ignore_errors=True)  # left by a worker that failed half-way
            folder.mkdir()
            work = GradingWorkdir(folder, assignments)
            for assignment in assignments:
                for student, nb in samples.submissions(assignment).items():
                    if (assignment, student) not in samples.GRADED_ALONE:  # part 3 grades those
                        work.submit(student, assignment, nb)
            for (student, assignment), nb in samples.serialised_submissions(assignments).items():
                work.submit(student, assignment, nb)
            results = work.grade()
            done.write_bytes(pickle.dumps((results, work.undecided)))
    return {"work": work, "results": results, "rows": work.scores(), "assignments": assignments}


def undecided_cells(*graded):
    """{(student, assignment, cell)} whose check could not decide, twice (scored zero, for a person):
    from GradingWorkdirs (their `.undecided`) or work folders (reports/manual_review.csv)."""
    import csv
    found = set()
    for source in graded:
        if isinstance(source, GradingWorkdir):
            found |= {(student, assignment, cell)
                      for (assignment, student), cells in (getattr(source, "undecided", None) or {}).items()
                      for cell in cells}
            continue
        listed = Path(source) / "reports" / "manual_review.csv"
        if listed.is_file():
            with open(listed, newline="") as rows:
                found |= {(r["student"], r["assignment"], r["cell"]) for r in csv.DictReader(rows)}
    return found


def skip_if_only_undecided(work, student, assignment, lost):
    """A reference answer's cells that scored below full (`lost`, grade ids) because a timing check
    could not decide on the busy test machine, twice (zero, and reports/manual_review.csv): grading
    did what it must, but the test learns nothing about those cells. It is then skipped, and the
    skip says so in the run's summary; a cell lost to a check that decided still fails it."""
    undecided = {cell for s, a, cell in undecided_cells(work) if (s, a) == (student, assignment)}
    if lost and set(lost) <= undecided:
        pytest.skip(f"{student}/{assignment}: undecided on this machine now, twice, so scored zero and "
                    f"listed for a person: {', '.join(sorted(lost))}")


# ---------------------------------------------------------------------------
# Answers judged as in grading, without a notebook: autograder/samples/judging.py.

@pytest.fixture(scope="module")
def judge():
    """A Judge for the module's tests; its students' processes stop with the module."""
    judging = Judge()
    yield judging
    judging.stop()


# ---------------------------------------------------------------------------
# Debian packages the tests install when missing (CI runs as root on Debian).

def apt_install(*packages):
    """apt-get install the Debian packages (update first if the plain install fails); skip where
    that cannot work (no apt-get, not root)."""
    import subprocess

    if shutil.which("apt-get") is None:
        pytest.skip(f"{' '.join(packages)} missing and apt-get is unavailable to install it (Debian/Ubuntu only)")
    if os.geteuid() != 0:
        pytest.skip(f"{' '.join(packages)} missing and installing it needs root: apt-get install {' '.join(packages)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=True)
        done = subprocess.run(install, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"apt-get install {packages} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"


@pytest.fixture
def short_tmp():
    """A temp folder for a subprocess's TMPDIR, removed afterwards. A process that ends with
    os._exit leaves what multiprocessing made in its temp folder (a pymp-* folder, a forkserver's
    socket); pytest's tmp_path cannot serve, since that socket's path must fit in 108 bytes
    (AF_UNIX), which /tmp/pytest-of-root/pytest-N/popen-gwN/<test>/pymp-*/listener-* overruns."""
    import tempfile
    folder = tempfile.mkdtemp(prefix="course-test-")
    yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


def process_running(pid, within=0.0):
    """Whether process `pid` runs now and still does `within` seconds from now (gone or a zombie:
    not): False as soon as it is seen gone."""
    deadline = time.monotonic() + within
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            return False
        if stat[stat.rindex(b")") + 2:][:1] in (b"Z", b"X"):
            return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.05)


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------
# Headless Chromium (Debian's package), shared by the browser tests.

CHROMIUM = Path("/usr/bin/chromium")
# The network is closed: without these flags Chromium keeps trying to reach Google.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]


@pytest.fixture(scope="session")
def chromium():
    """{"path", "flags"}: Debian's chromium, installed with apt-get if needed."""
    if not CHROMIUM.exists():
        apt_install("chromium")
        assert CHROMIUM.exists(), "apt-get installed chromium but /usr/bin/chromium is missing"
    return {"path": CHROMIUM, "flags": CHROMIUM_FLAGS}


@pytest.fixture(scope="session")
def port_factory():
    """A function returning a free TCP port on localhost."""
    return free_port


# ---------------------------------------------------------------------------
# A throw-away PostgreSQL server (Debian's postgresql package).

class PostgresServer:
    """PostgreSQL run from a temp folder on a free localhost port, as an unprivileged user
    (the server refuses root); `url(name)` creates a database and returns its URL."""

    USER = "coursepg"  # the unprivileged account the server runs as when the tests run as root

    def __init__(self, folder):
        self.bin = self._binaries()
        self.folder = Path(folder)
        self.data, self.socket_dir = self.folder / "data", self.folder / "socket"
        self.port = free_port()
        self.run_as = self._account()
        for path in (self.folder, self.socket_dir):
            path.mkdir(parents=True, exist_ok=True)
            if self.run_as:
                shutil.chown(path, self.run_as, self.run_as)
        self.folder.chmod(0o755)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "grader", "-E", "UTF8", "--no-sync")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60",
                  "-o", f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
                        "-c max_connections=200 -c fsync=off", "start")

    @staticmethod
    def _binaries():
        candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
        if not candidates and shutil.which("initdb") is None:
            apt_install("postgresql")
            candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
        if candidates:
            return candidates[-1].parent
        return Path(shutil.which("initdb")).parent

    def _account(self):
        """The user the server runs as: None (ourselves) unless we are root."""
        import pwd
        import subprocess

        if os.geteuid() != 0:
            return None
        try:
            pwd.getpwnam(self.USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                            self.USER], check=True, capture_output=True)
        return self.USER

    def _run(self, tool, *args):
        import subprocess

        command = [str(self.bin / tool), *args]
        if self.run_as:
            command = ["runuser", "-u", self.run_as, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.folder)
        log = self.folder / "server.log"
        assert done.returncode == 0, (f"{tool} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
                                      + (log.read_text()[-2000:] if log.exists() else ""))

    def url(self, database):
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="grader", dbname="postgres",
                             autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}"')
            admin.execute(f'CREATE DATABASE "{database}"')
        return f"postgresql://grader@127.0.0.1:{self.port}/{database}"

    def stop(self):
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


@pytest.fixture(scope="session")
def postgres():
    """One PostgreSQL server for the session, in a folder of /tmp the server's account can reach
    (pytest's own temp folders are private to the user running the tests)."""
    import tempfile

    pytest.importorskip("psycopg", reason="psycopg is missing: bin/test installs requirements.txt")
    folder = Path(tempfile.mkdtemp(prefix="course-postgres-"))
    try:
        server = PostgresServer(folder)
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------
# The course's commands run as an instructor runs them, in a throw-away work folder.

# Light assignments graded by the tests of grading beyond one machine (PostgreSQL, Dask).
SCALE_ASSIGNMENTS = ("01_processes_threads",)


SHORT_VERBS = ("release", "samples", "feedback", "report", "student")


def course_cli(*args, workdir, db_url=None, env=None, timeout=600, root=None, prefix=()):
    """`python -m autograder <args>` with COURSE_WORKDIR (and COURSE_DB_URL); the finished process.
    `root`: another copy of the course (copy_course) to run; `prefix`: a command to run it under."""
    import subprocess
    import sys

    full_env = {k: v for k, v in os.environ.items() if k != "COURSE_DB_URL"}
    full_env.update({"COURSE_WORKDIR": str(workdir), **(env or {})})
    if db_url:
        full_env["COURSE_DB_URL"] = db_url
    if root is not None:
        full_env["PYTHONPATH"] = str(root)
    full_env.setdefault("MPLBACKEND", "Agg")
    # Verbs that grade or run notebooks take the lease themselves, or run too long to hold it.
    short = args[0] in SHORT_VERBS
    with beside_timing_checks() if short else contextlib.nullcontext():
        done = subprocess.run([*prefix, sys.executable, "-m", "autograder", *args], cwd=root or course.ROOT,
                              env=full_env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"python -m autograder {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def copy_course(dest):
    """A copy of the course's own files (no environment, history or work) at `dest`, to change."""
    shutil.copytree(course.ROOT, dest, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".whl", ".gpu", "__pycache__", ".pytest_cache", "dist", "submitted", "autograded",
        "feedback", "reports", "gradebook.db*"))
    return Path(dest)


def prepare_course(workdir, assignments, db_url=None, with_samples=True):
    """Release (into the work folder: the repository's release/ stays as it is, with its
    gradebook entries going to `db_url`) and the sample submissions, as the main job does."""
    work = course.Course(workdir, db_url or f"sqlite:///{Path(workdir) / 'gradebook.db'}")
    with beside_timing_checks():
        release.generate(list(assignments), release_dir=work.workdir / "release-check", work=work)
    if with_samples:
        course_cli("samples", *assignments, workdir=workdir, db_url=work.db_url)
    return work.db_url


def gradebook_scores(workdir, db_url, assignments=None):
    """cell_scores() of the gradebook at db_url, as {(student, assignment, cell): (score, max)}."""
    rows = gradebook.cell_scores(assignments, course.Course(workdir, db_url))
    return {(r["student"], r["assignment"], r["cell"]): (r["score"], r["max_score"]) for r in rows}


@pytest.fixture(scope="session")
def sqlite_baseline(graded_course):
    """The sample submissions of SCALE_ASSIGNMENTS as graded locally into SQLite (the shared
    graded course): the reference the PostgreSQL and Dask runs must equal."""
    work = graded_course["work"].path
    scores = {key: value for key, value in
              gradebook_scores(work, f"sqlite:///{work / 'gradebook.db'}", list(SCALE_ASSIGNMENTS)).items()
              if key[0] in samples.STUDENTS}
    assert scores, "the SQLite run graded nothing"
    return scores


def autograded(work, student, assignment):
    """What a finished autograde leaves: autograded/<student>/<assignment>/<assignment>.ipynb."""
    folder = work.autograded / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{assignment}.ipynb").write_text("{}")


def scratch_gradebook(tmp_path, assignments, students, graded):
    """A scratch course: each assignment one notebook of one 2-point test cell (test_x);
    `graded` {(student, assignment): score} of the submissions, each in submitted/, autograded unless
    the score is None (a failed autograde: the rows stay, at the score of an earlier submission when given)."""
    from nbgrader.api import Gradebook

    from autograder import course, gradebook

    work = course.Course(tmp_path, f"sqlite:///{tmp_path / 'gradebook.db'}")
    gradebook.create(work.db_url)
    with Gradebook(work.db_url) as gb:
        for a in assignments:
            gb.add_assignment(a)
            gb.add_notebook(a, a)
            gb.add_grade_cell("test_x", a, a, max_score=2, cell_type="code")
        for student in students:
            gb.add_student(student)
        for (student, a), score in graded.items():
            gb.add_submission(a, student)
            gb.find_grade("test_x", a, a, student).auto_score = 2 if score is None else score
        gb.db.commit()
    for (student, a), score in graded.items():
        (work.submitted / student / a).mkdir(parents=True, exist_ok=True)
        if score is not None:
            autograded(work, student, a)
    return work


@pytest.fixture(scope="session")
def course_tools():
    """The helpers above for test modules (which cannot import conftest)."""
    import types
    return types.SimpleNamespace(cli=course_cli, prepare=prepare_course, scores=gradebook_scores, copy=copy_course,
                                 assignments=SCALE_ASSIGNMENTS, free_port=free_port, apt_install=apt_install,
                                 skip_if_only_undecided=skip_if_only_undecided, undecided_cells=undecided_cells,
                                 beside_timing_checks=beside_timing_checks, workdir=GradingWorkdir,
                                 running=process_running, scratch_gradebook=scratch_gradebook,
                                 autograded=autograded)


@pytest.fixture
def cli_steps(monkeypatch):
    """Every verb the CLI runs is a spy: {verb: args.students} of the steps that ran."""
    from autograder import cli

    seen = {}

    def step(name, *_):
        def run(args):
            seen[name] = args.students
            return 0
        return run

    monkeypatch.setattr(cli, "_verb", step)
    return seen
