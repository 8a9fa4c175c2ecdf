"""Warm starts (autograder/sandbox/zygote.py): a child forked from a zygote starts as clean as a
new interpreter, nothing of one child reaches the next, and only the grader can ask for one."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from autograder import course
from autograder.pipeline import warm
from autograder.sandbox.limits import without_secrets
from autograder.sandbox import zygote


@pytest.fixture(autouse=True)
def no_inherited_pair(monkeypatch):
    """These tests start zygotes of their own: bin/test's pair for the whole run (inherited()) is
    not theirs."""
    for variable in (*warm.SHARED_VARIABLES.values(), warm.HELD_FOR):
        monkeypatch.delenv(variable, raising=False)


PROBE = textwrap.dedent('''
    import json, os, sys, time

    def _tell(data):
        with os.fdopen(int(sys.argv[1]), "w") as out:
            json.dump(data, out)

    def report():
        import numpy
        _tell({"pid": os.getpid(), "sid": os.getsid(0), "cwd": os.getcwd(), "argv": sys.argv,
               "env": dict(os.environ), "started_with": open("/proc/self/environ", "rb").read().decode(),
               "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")),
               "threads": len(os.listdir("/proc/self/task")), "draw": float(numpy.random.random()),
               "marker": getattr(numpy, "left_by_a_sibling", None), "modules": sorted(sys.modules)})

    def mutate():
        import numpy
        numpy.left_by_a_sibling = "a previous student's value"
        os.environ["LEFT_BY_A_SIBLING"] = "1"
        _tell({"done": True})

    def exit_with():
        return int(sys.argv[1])

    def wait_forever():
        while True:
            time.sleep(1)
''')


@pytest.fixture(scope="module")
def probe_zygote():
    folder = Path(tempfile.mkdtemp(prefix="course-zygote-test-"))  # not under pytest's own folder (mode 0700)
    (folder / "zygote_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
           "COURSE_DB_URL": "postgresql://grader:hunter2@db/course"}
    socket = str(folder / "socket")
    spec = {"preload": ["numpy", "zygote_probe"],
            "entries": [f"zygote_probe:{f}" for f in ("report", "mutate", "exit_with", "wait_forever")]}
    server = subprocess.Popen([sys.executable, "-P", "-c", "from autograder.sandbox.zygote import serve; serve()",
                               socket, json.dumps(spec)], env=without_secrets(env))
    zygote.connect(socket, timeout=60).close()
    yield {"socket": socket, "env": env, "folder": folder, "server": server}
    server.terminate()  # it kills what it forked on the way out
    server.wait(timeout=30)
    shutil.rmtree(folder, ignore_errors=True)


def _ask(probe, entry, env=None, cwd=None):
    read, write = os.pipe()
    child = zygote.start(probe["socket"], f"zygote_probe:{entry}", [str(write)], pass_fds=(write,),
                         env=env or probe["env"], cwd=cwd or probe["folder"])
    os.close(write)
    with os.fdopen(read) as source:
        data = json.loads(source.read() or "null")
    assert child.wait(timeout=30) == 0
    return child, data


def test_a_child_starts_as_a_new_interpreter_would(probe_zygote, tmp_path):
    env = {"PATH": os.environ["PATH"], "ONLY_THIS": "yes"}
    child, seen = _ask(probe_zygote, "report", env=env, cwd=tmp_path)
    assert isinstance(child, zygote.Child) and seen["pid"] == child.pid
    assert seen["sid"] == child.pid, "a session of its own"
    assert seen["env"] == env and seen["cwd"] == str(tmp_path)
    assert seen["argv"] == ["zygote_probe", seen["argv"][1]]
    assert seen["fds"] == sorted({0, 1, 2, int(seen["argv"][1])}), \
        f"descriptors other than those given stayed open: {seen['fds']}"
    assert "hunter2" not in seen["started_with"], "what the zygote was started with holds no secret"
    assert "numpy" in seen["modules"], "the preloaded libraries are there"


def test_nothing_of_one_child_reaches_the_next(probe_zygote):
    _ask(probe_zygote, "mutate")
    _, first = _ask(probe_zygote, "report")
    _, second = _ask(probe_zygote, "report")
    for seen in (first, second):
        assert seen["marker"] is None and "LEFT_BY_A_SIBLING" not in seen["env"]
    assert first["draw"] != second["draw"], "each child draws fresh random state (NumPy's global generator)"


def test_exit_codes_come_back_and_a_lost_requester_takes_its_child_along(probe_zygote):
    child = zygote.start(probe_zygote["socket"], "zygote_probe:exit_with", ["7"], env=probe_zygote["env"])
    assert child.wait(timeout=30) == 7
    child = zygote.start(probe_zygote["socket"], "zygote_probe:wait_forever", [], env=probe_zygote["env"])
    assert child.poll() is None
    child.kill()
    assert child.wait(timeout=30) == -signal.SIGKILL
    # A requester that dies (its connection drops) takes its child along.
    code = (f"import sys, time\nfrom autograder.sandbox import zygote\n"
            f"c = zygote.start({probe_zygote['socket']!r}, 'zygote_probe:wait_forever', [])\n"
            "print(c.pid, flush=True)\ntime.sleep(60)\n")
    requester = subprocess.Popen([sys.executable, "-c", code], env=probe_zygote["env"], stdout=subprocess.PIPE,
                                 text=True)
    pid = int(requester.stdout.readline())
    requester.kill()
    requester.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), "the child outlived its requester"


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_unknown_entries_are_refused(probe_zygote):
    with pytest.raises(OSError):
        zygote.connect(probe_zygote["socket"]).close()  # the socket answers...
        sock = zygote.connect(probe_zygote["socket"])
        zygote._send_request(sock, {"entry": "os:system", "argv": ["x"], "env": {}, "cwd": "/", "fds": []}, [])
        sock.settimeout(10)
        if not sock.recv(100):  # ...and closes without a pid
            raise ConnectionError("refused")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as another uid")
def test_another_uid_cannot_ask_for_a_child(probe_zygote):
    """Student code runs as another uid: even with the socket's path, the zygote refuses it."""
    os.chmod(probe_zygote["folder"], 0o755)
    os.chmod(probe_zygote["socket"], 0o777)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a student's process: another uid, the socket's path known
        answer = b"error"
        try:
            import traceback
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            sock = zygote.connect(probe_zygote["socket"], timeout=5)  # the path is reachable...
            try:
                zygote._send_request(sock, {"entry": "zygote_probe:exit_with", "argv": ["x", "0"], "env": {},
                                            "cwd": "/", "fds": []}, [])
                sock.settimeout(10)
                answer = b"answer:" + sock.recv(100)
            except (BrokenPipeError, ConnectionResetError):
                answer = b"answer:"  # ...and the zygote hung up on it
        except BaseException:
            answer = traceback.format_exc().encode()
        finally:
            os.write(write, answer)
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as source:
        answer = source.read()
    os.waitpid(pid, 0)
    assert answer == b"answer:", f"the zygote answered another uid: {answer!r}"


def _catches(pid, signum):
    with open(f"/proc/{pid}/status") as status:
        caught = next(line.split()[1] for line in status if line.startswith("SigCgt:"))
    return bool(int(caught, 16) >> (signum - 1) & 1)


def test_the_thin_client_forwards_signals_and_exit_codes(probe_zygote):
    command = [sys.executable, "-S", "-P", "-m", "autograder.sandbox.zygote", probe_zygote["socket"],
               "zygote_probe:exit_with", "5"]
    assert subprocess.run(command, env=probe_zygote["env"], timeout=60).returncode == 5
    command[-2:] = ["zygote_probe:wait_forever"]
    client = subprocess.Popen(command, env=probe_zygote["env"])
    # Once it forwards SIGTERM (it catches it: /proc's SigCgt), not after a guessed while.
    deadline = time.monotonic() + 60
    while not _catches(client.pid, signal.SIGTERM) and client.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    client.send_signal(signal.SIGTERM)
    assert client.wait(timeout=30) == 128 + signal.SIGTERM


def test_without_a_zygote_a_new_interpreter_runs_the_entry(probe_zygote):
    child = zygote.start(None, "zygote_probe:exit_with", ["4"], env=probe_zygote["env"])
    assert isinstance(child, subprocess.Popen) and child.wait(timeout=60) == 4


def test_the_sandbox_zygote_holds_no_hidden_check():
    """A child's memory is the student's to read: the zygote that forks kernels and student's
    processes never imports the checks (the judge's zygote does)."""
    assert not any("checks" in name for name in warm.KINDS["sandbox"]["preload"])
    assert not warm.KINDS["sandbox"].get("after")


def test_a_zygote_whose_worker_died_while_it_imported_ends(tmp_path):
    """A grading worker killed while its zygote still imports (a Dask worker lost early) leaves
    no zygote behind: the zygote knows its parent from the start, not from after the imports."""
    folder = Path(tempfile.mkdtemp(prefix="course-zygote-test-"))
    socket = str(folder / "socket")
    launcher = (
        "import json, os, subprocess, sys\n"
        "spec = {'preload': ['numpy'], 'entries': [], 'parent': os.getpid()}\n"
        "z = subprocess.Popen([sys.executable, '-P', '-c', 'from autograder.sandbox.zygote import serve; serve()',"
        f" {socket!r}, json.dumps(spec)])\n"
        "print(z.pid, flush=True)\n"
        "os._exit(0)\n")  # the worker dies at once, before the zygote has imported numpy
    done = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, timeout=60,
                          cwd=course.ROOT)
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists() and \
            Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z":
        time.sleep(0.1)
    try:
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z", \
            "the zygote outlived the worker that started it"
        assert not folder.exists(), "the zygote left its socket's folder behind"
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
        shutil.rmtree(folder, ignore_errors=True)


class _StandInZygote:
    """Stands in for warm._Zygote: no process; `dead` makes it look ended."""
    started = []

    def __init__(self, kind):
        self.kind, self.dead, self.stopped = kind, False, False
        self.socket = f"/nowhere/{kind}-{len(self.started)}"
        self.process = type("Process", (), {"poll": lambda _: 1 if self.dead else None})()
        self.started.append(self)

    def ready(self, timeout=0):
        return True

    def stop(self):
        self.stopped = True


def _grade_with_a_regrade(monkeypatch, tmp_path, between_passes=lambda: None):
    """Run grade.autograde with stand-ins: the batch leaves one cell undecided, the regrade none.
    Returns (alone, zygote sockets) for each pass."""
    from autograder import grade
    passes = []

    def run_all(verb, pairs, alone=False, **kwargs):
        with warm.shared({}) as env:  # as jobs.run_all does for its workers
            passes.append((alone, {name: env[name] for name in warm.SHARED_VARIABLES.values()}))
        between_passes()
        return []

    unsure = iter([{("01_processes_threads", "ann"): ["test_cpu_info"]}, {}])
    _StandInZygote.started = []
    monkeypatch.setattr(warm, "_Zygote", _StandInZygote)
    monkeypatch.setattr(grade.jobs, "run_all", run_all)
    monkeypatch.setattr(grade, "undecided_cells", lambda pairs, work=None: next(unsure))
    monkeypatch.delenv("COURSE_SCHEDULER", raising=False)
    monkeypatch.delenv("COURSE_WARM_START", raising=False)
    grade.autograde([("01_processes_threads", "ann")], work=course.Course(tmp_path))
    assert [alone for alone, _ in passes] == [False, True], passes
    assert all(z.stopped for z in _StandInZygote.started) and not warm._kept
    return passes


def test_the_regrade_alone_forks_from_the_batchs_zygotes(tmp_path, monkeypatch):
    """`grade` starts one pair of zygotes for its batch and its regrade alone (each pair costs
    about 6 CPU-s and 3 s to start), and stops them when both passes are done."""
    passes = _grade_with_a_regrade(monkeypatch, tmp_path)
    assert passes[0][1] == passes[1][1], "the regrade alone started zygotes of its own"
    assert len(_StandInZygote.started) == len(warm.KINDS)


def test_a_zygote_that_died_in_the_batch_is_started_again_for_the_regrade(tmp_path, monkeypatch):
    def sandbox_dies():
        next(z for z in _StandInZygote.started if z.kind == "sandbox").dead = True

    first, second = (sockets for _, sockets in _grade_with_a_regrade(monkeypatch, tmp_path, sandbox_dies))
    sandbox, judge = warm.SHARED_VARIABLES["sandbox"], warm.SHARED_VARIABLES["judge"]
    assert second[sandbox] != first[sandbox] and second[judge] == first[judge]
    assert len(_StandInZygote.started) == len(warm.KINDS) + 1


def test_a_zygote_starts_from_a_shell_that_did_not_source_env_sh(monkeypatch, tmp_path):
    """`python -m autograder grade` run from the course folder without bin/env.sh: the zygotes
    (started with -P, so without the working folder on their path) still import autograder.
    Before, they died at once, and every kernel start then waited two minutes for their socket."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)
    started = warm._Zygote("sandbox")
    try:
        assert started.ready(timeout=120), f"the zygote died (exit {started.process.poll()})"
    finally:
        started.stop()


@pytest.mark.parametrize("cause", ["its imports fail", "its socket's path is past AF_UNIX's 108 bytes"])
def test_a_zygote_that_cannot_start_is_not_waited_for(monkeypatch, cause):
    """A shared zygote that cannot serve says so beside its socket: a worker's start falls back
    to a new interpreter at once instead of waiting two minutes for a socket that never comes.
    (A path too long to bind said nothing until 2026-11-30: every start waited.)"""
    folder = Path(tempfile.mkdtemp(prefix="course-zygote-test-"))
    if cause.startswith("its imports"):
        spec = {"preload": ["a_module_that_does_not_exist"], "entries": []}
    else:
        folder = folder / ("long-" * 20)
        folder.mkdir()
        spec = {"preload": [], "entries": []}
    socket = str(folder / "socket")
    server = subprocess.Popen([sys.executable, "-P", "-c", "from autograder.sandbox.zygote import serve; serve()",
                               socket, json.dumps(spec)], stderr=subprocess.DEVNULL)
    try:
        monkeypatch.setenv(warm.SHARED_VARIABLES["sandbox"], socket)
        start = time.monotonic()
        assert warm.socket_path("sandbox") is None
        assert time.monotonic() - start < 60, "the worker waited for a zygote that had failed"
        assert server.wait(timeout=60) != 0
        assert os.path.exists(socket + zygote.FAILED)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(folder.parent if folder.name.startswith("long-") else folder, ignore_errors=True)


def test_under_a_long_temp_folder_the_sockets_go_where_their_path_fits(monkeypatch, tmp_path):
    """A grader whose TMPDIR is long (a cluster job's scratch folder): the zygote's socket goes in
    a folder of the grader's alone under /tmp instead, and the zygote answers there. Before, its
    bind failed and every start of a kernel, judge or student's process waited two minutes."""
    long = tmp_path / ("scratch-" * 10)
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    monkeypatch.setitem(warm.KINDS, "sandbox", {"preload": [], "entries": []})  # nothing to import
    started = warm._Zygote("sandbox")
    try:
        assert len(os.fsencode(started.socket + ".new")) <= 107, started.socket
        assert started.ready(timeout=60), f"the zygote died (exit {started.process.poll()})"
        made = os.stat(started.folder)
        assert made.st_uid == os.getuid() and made.st_mode & 0o777 == 0o700
    finally:
        started.stop()
    assert not os.path.exists(started.folder)


def _hold_a_pair():
    """`python -m autograder.pipeline.warm`, as bin/test starts it: (the process, {variable: socket})."""
    holder = subprocess.Popen([sys.executable, "-m", "autograder.pipeline.warm"], stdout=subprocess.PIPE, text=True,
                              cwd=course.ROOT)
    lines = [holder.stdout.readline().strip() for _ in range(len(warm.SHARED_VARIABLES) + 1)]
    assert all("=" in line for line in lines), lines
    named = dict(line.split("=", 1) for line in lines)
    assert named.pop(warm.HELD_FOR) == warm.held_for()
    return holder, named


@pytest.fixture(scope="module")
def held_pair():
    """One held pair for the tests that leave it running (a pair costs about 12 CPU-s to start)."""
    holder, sockets = _hold_a_pair()
    try:
        yield holder, sockets
    finally:
        holder.terminate()
        holder.wait(30)


def _zygotes_of(holder):
    return [int(pid) for pid in Path(f"/proc/{holder.pid}/task/{holder.pid}/children").read_text().split()]


def test_grading_under_a_held_pair_starts_none_and_forks_from_it(held_pair, monkeypatch):
    """bin/test holds one pair for the whole run: `grade` (kept(), shared()) starts none of its own,
    and its workers get the held pair's sockets, which fork."""
    holder, sockets = held_pair
    for variable, path in sockets.items():
        monkeypatch.setenv(variable, path)
    monkeypatch.setenv(warm.HELD_FOR, warm.held_for())

    def no_new_zygote(kind):
        raise AssertionError(f"a {kind} zygote was started beside the held pair")
    monkeypatch.setattr(warm, "_Zygote", no_new_zygote)
    with warm.kept(), warm.shared({}) as env:
        assert {variable: env[variable] for variable in sockets} == sockets
    for kind, entry in (("sandbox", warm.STUDENT), ("judge", warm.JUDGE)):
        with open(os.devnull, "w") as quiet:
            child = zygote.start(sockets[warm.SHARED_VARIABLES[kind]], entry, ["no such spec"],
                                 stdout=quiet.fileno(), stderr=quiet.fileno())
            child.wait(timeout=60)  # it fails on the missing spec: what counts is who started it
        assert isinstance(child, zygote.Child), f"the held {kind} zygote did not fork the process"


def test_a_held_pair_that_does_not_answer_is_not_used(monkeypatch, tmp_path):
    """Sockets named in the environment that do not answer (the holder ended, or they belong to
    another user): `grade` starts its own pair instead of waiting for them."""
    not_a_socket = tmp_path / "socket"
    not_a_socket.write_text("")
    for variable in warm.SHARED_VARIABLES.values():
        monkeypatch.setenv(variable, str(not_a_socket))
    monkeypatch.setenv(warm.HELD_FOR, warm.held_for())
    _StandInZygote.started = []
    monkeypatch.setattr(warm, "_Zygote", _StandInZygote)
    with warm.shared({}) as env:
        assert all(env[v] != str(not_a_socket) for v in warm.SHARED_VARIABLES.values())
    assert len(_StandInZygote.started) == len(warm.KINDS) and all(z.stopped for z in _StandInZygote.started)


@pytest.mark.parametrize("held_for", ["another course", "another grader"])
def test_a_pair_held_for_someone_else_is_not_used(held_pair, monkeypatch, held_for):
    """A held pair imported its own course's code and forks with its holder's powers: `grade` on a
    copy of the course (other checks), or as a grader with fewer powers (`unshare --user` keeps the
    uid outside and could still reach the socket), starts its own pair, and its workers get that."""
    holder, sockets = held_pair
    for variable, path in sockets.items():
        monkeypatch.setenv(variable, path)
    uid, namespace, root = warm.held_for().split(":", 2)
    other = f"{uid}:{namespace}:/elsewhere/course" if held_for == "another course" else f"{uid}:user:[1]:{root}"
    monkeypatch.setenv(warm.HELD_FOR, other)
    assert warm.inherited() is None
    _StandInZygote.started = []
    monkeypatch.setattr(warm, "_Zygote", _StandInZygote)
    with warm.kept(), warm.shared(dict(os.environ)) as env:
        assert all(env[v] != sockets[v] for v in warm.SHARED_VARIABLES.values())
        assert warm.HELD_FOR not in env, "the workers would take their own pair for someone else's"
    assert len(_StandInZygote.started) == len(warm.KINDS)
    monkeypatch.setattr(warm, "_running", {})
    assert warm.socket_path("sandbox") != sockets[warm.SHARED_VARIABLES["sandbox"]]


def test_the_held_pair_ends_with_its_holder_and_is_not_waited_for(monkeypatch):
    """Stopped (bin/test's trap), the holder leaves no zygote and no folder behind; a worker still
    given its sockets starts new interpreters at once, rather than waiting two minutes for them."""
    holder, sockets = _hold_a_pair()
    try:
        pids = _zygotes_of(holder)
        assert len(pids) == len(warm.KINDS)
    finally:
        holder.terminate()
        holder.wait(30)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids), "a held zygote outlived its holder"
    assert not any(Path(path).parent.exists() for path in sockets.values())
    for variable, path in sockets.items():
        monkeypatch.setenv(variable, path)
    monkeypatch.setenv(warm.HELD_FOR, warm.held_for())
    start = time.monotonic()
    assert warm.socket_path("sandbox") is None and warm.socket_path("judge") is None
    assert time.monotonic() - start < 10


def test_an_orphaned_holder_ends(tmp_path):
    """The shell that ran bin/test killed outright: the holder notices its parent is gone and ends,
    taking its zygotes along."""
    script = f"{sys.executable} -m autograder.pipeline.warm > {tmp_path / 'sockets'} & echo $! ; sleep 600"
    shell = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True, cwd=course.ROOT)
    holder, pids = int(shell.stdout.readline()), []
    try:
        deadline = time.monotonic() + 120
        sockets = tmp_path / "sockets"
        while (not sockets.exists() or len(sockets.read_text().splitlines()) < 3) and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [int(p) for p in Path(f"/proc/{holder}/task/{holder}/children").read_text().split()]
        assert len(pids) == len(warm.KINDS)
    finally:
        shell.kill()
        shell.wait()
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in (holder, *pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in (holder, *pids))


def _gone(pid, within=15.0):
    """Whether process `pid` has ended (or is a zombie no one reaps yet) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_a_thin_client_whose_parent_is_killed_takes_its_child_with_it(probe_zygote):
    """A grading worker stopped with SIGKILL never shuts its kernel down: the kernel's stand-in
    sees its parent go and ends the kernel (it ran on, waiting for messages, before)."""
    before = _children_of(probe_zygote["server"].pid)  # another test's may still be there
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        f"client = subprocess.Popen([sys.executable, '-S', '-P', '-m', 'autograder.sandbox.zygote', "
        f"{probe_zygote['socket']!r}, 'zygote_probe:wait_forever'], start_new_session=True)\n"
        "print(client.pid, flush=True)\n"
        "time.sleep(600)\n")], env=probe_zygote["env"], stdout=subprocess.PIPE, text=True)
    client = int(parent.stdout.readline())
    deadline = time.monotonic() + 60
    children = []
    while not children and time.monotonic() < deadline:  # the child forked for it, in its own session
        children = _children_of(probe_zygote["server"].pid) - before
        time.sleep(0.05)
    assert children, "the zygote forked no child for the thin client"
    parent.kill()
    parent.wait()
    assert _gone(client) and all(_gone(pid) for pid in children)


def _children_of(pid):
    return {int(p) for p in os.listdir("/proc") if p.isdigit() and _ppid(int(p)) == pid}


def _ppid(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


def test_a_zygote_stopped_with_sigterm_kills_what_it_forked(tmp_path):
    """warm.py stops its zygotes with SIGTERM once `grade` ends, interrupted or not: a judge or a
    student's process still running then dies with the zygote (SIGKILL left it running on)."""
    folder = Path(tempfile.mkdtemp(prefix="course-zygote-test-"))
    (folder / "zygote_probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}
    socket = str(folder / "socket")
    server = subprocess.Popen([sys.executable, "-P", "-c", "from autograder.sandbox.zygote import serve; serve()",
                               socket, json.dumps({"preload": ["zygote_probe"], "entries": ["zygote_probe:wait_forever"]})],
                              env=without_secrets(env))
    try:
        zygote.connect(socket, timeout=60).close()
        child = zygote.start(socket, "zygote_probe:wait_forever", [], env=env, cwd=str(folder))
        server.terminate()
        assert server.wait(timeout=30) == 128 + signal.SIGTERM
        assert _gone(child.pid), "the forked child outlived its zygote"
    finally:
        if server.poll() is None:
            server.kill()
        shutil.rmtree(folder, ignore_errors=True)



def test_the_clean_up_kills_its_children_and_never_a_pid_reaped_before(monkeypatch):
    """The zygote's SIGTERM clean-up kills every child it counts: a SIGTERM between reaping a child
    and uncounting it (a signal that another thread of the zygote takes reaches the main thread
    between any two steps) left a reaped pid counted, to be killed though it may be another
    process's by then. The clean-up kills only what is still a child of the zygote."""
    reaped = subprocess.Popen([sys.executable, "-c", "pass"])
    reaped.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    killed = []

    def spy(real):
        def call(pid, signum):
            killed.append(pid)
            if pid != alive.pid:  # never a signal to a pid that may be another process's now
                raise ProcessLookupError(pid)
            real(pid, signum)
        return call
    monkeypatch.setattr(os, "killpg", spy(os.killpg))
    monkeypatch.setattr(os, "kill", spy(os.kill))
    try:
        zygote._kill_children({reaped.pid: None, alive.pid: None})
    finally:
        monkeypatch.undo()
        if alive.poll() is None:
            alive.kill()
    assert alive.wait(10) == -signal.SIGKILL
    assert reaped.pid not in killed and alive.pid in killed, killed


def test_a_sigterm_in_a_held_step_exits_at_its_end():
    """Between a fork and the count of the child, and between reaping a child and uncounting it,
    a SIGTERM's exit waits: Python runs the handler in the main thread between any two steps,
    whichever thread the signal reached, and the zygote has several (a child left uncounted was
    never killed)."""
    previous = signal.signal(signal.SIGTERM, zygote._exit_on_sigterm)
    steps = []
    try:
        with pytest.raises(SystemExit) as stopped:
            with zygote._exit_held():
                os.kill(os.getpid(), signal.SIGTERM)
                deadline = time.monotonic() + 30
                while zygote._held_exit["signum"] is None and time.monotonic() < deadline:
                    time.sleep(0.001)  # the handler runs here (whichever thread the signal reached)
                steps.append(zygote._held_exit["signum"])
                steps.append("counted")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert steps == [signal.SIGTERM, "counted"] and stopped.value.code == 128 + signal.SIGTERM
    with zygote._exit_held():  # nothing is left held for the next
        pass
