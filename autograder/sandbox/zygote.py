"""Warm starts: a submission's processes forked from an interpreter that has already imported
the heavy libraries.

`import torch` alone costs a process about 1.3 s of CPU, and grading a notebook
starts three processes that need it (nbgrader's kernel, the judge and the judge's
student's process). A zygote imports such libraries once and then only forks:
each child is a copy of an interpreter in which nothing but imports ever ran, so
it starts as a new one would, and nothing of another submission can reach it
(every child is forked from the zygote, never from a sibling).

    python -P -c "from autograder.sandbox.zygote import serve; serve()" <socket> <spec JSON>

The grading worker starts it (autograder/pipeline/warm.py) as the grader, with no
secret in its environment. It listens on a Unix socket in a folder only the
grader may enter and answers only connections from its own uid. A request names
one of the entry points the zygote was started with ("module:function"), the
child's argv, environment, working folder and file descriptors (sent along with
SCM_RIGHTS). The child starts a session of its own, keeps only those
descriptors, takes that environment and folder, draws fresh random state, and
runs the entry point, which enters the sandbox first as a new process would; it
never returns into the zygote's code. The zygote reports the child's exit on
the connection, and kills the child's process group if the connection drops.

`start()` is the requester's side (a Popen look-alike); run as a module,
`python -S -P -m autograder.sandbox.zygote <socket> <module:function> args...`
is a thin stand-in for `python -P -m <module> args...` (nbgrader's kernel
command): it has the zygote fork the process, forwards signals to it, and exits
with its exit code.
"""
import array
import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time

_HEADER = struct.Struct("!I")
_MAX_FDS = 16
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


# --- both sides ---------------------------------------------------------------------------------
def _send_request(sock, request, fds):
    data = json.dumps(request).encode()
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([_HEADER.pack(len(data)) + data], ancillary)


def _receive_request(sock):
    """(request, [fds]) read from a connection (blocking)."""
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, _MAX_FDS)
    if len(data) < _HEADER.size:
        raise ConnectionError("a short request")
    (size,) = _HEADER.unpack_from(data)
    data = data[_HEADER.size:]
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            raise ConnectionError("the request was cut short")
        data += more
    return json.loads(data[:size]), list(fds)


# --- a spec handed to a child: in memory, inherited ------------------------------------------
def spec_in_memory(spec):
    """A descriptor of an anonymous in-memory file holding `spec` as JSON, for a child process to
    inherit and read as spec_path_of(fd): nothing on disk to remove, whatever ends the child or us."""
    fd = os.memfd_create("course-spec", os.MFD_CLOEXEC)
    data = json.dumps(spec).encode()
    written = 0
    while written < len(data):
        written += os.write(fd, data[written:])
    return fd


def spec_path_of(fd):
    """The path by which a process that inherited `fd` opens it afresh, from its start."""
    return f"/proc/self/fd/{fd}"


def read_spec(path):
    """The JSON spec at `path`; an inherited in-memory one (spec_path_of) is closed once read."""
    with open(path) as spec_file:
        spec = json.load(spec_file)
    if path.startswith("/proc/self/fd/"):
        os.close(int(path.rsplit("/", 1)[1]))
    return spec


# --- the requester's side ---------------------------------------------------------------------
class Child:
    """A process forked by a zygote for us, used like subprocess.Popen (pid, poll, wait, kill)."""

    def __init__(self, sock, pid):
        self._sock, self.pid, self.returncode = sock, pid, None
        self._buffer = b""
        try:
            self._pidfd = os.pidfd_open(pid)  # signals reach this process, never a later one with its pid
        except (AttributeError, OSError):
            self._pidfd = None

    def _take_lines(self):
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            message = json.loads(line)
            if "exit" in message:
                self._finish(int(message["exit"]))

    def _finish(self, code):
        self.returncode = code
        for closing in (self._sock.close, lambda: self._pidfd is not None and os.close(self._pidfd)):
            try:
                closing()
            except OSError:
                pass
        self._pidfd = None

    def _read(self, timeout):
        self._sock.settimeout(timeout)
        try:
            chunk = self._sock.recv(4096)
        except (socket.timeout, BlockingIOError):
            return
        except OSError:
            chunk = b""
        if not chunk:  # the zygote is gone: so is the child (it kills its children on the way out)
            self._finish(-signal.SIGKILL)
            return
        self._buffer += chunk
        self._take_lines()

    def poll(self):
        if self.returncode is None:
            self._read(0)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                import subprocess
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            self._read(left)
        return self.returncode

    def send_signal(self, signum):
        """`signum` to the child's process group (its own session), as a signal to a new
        process group would reach it and the processes it started."""
        if self.poll() is not None:
            return
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            if self._pidfd is not None:
                try:
                    signal.pidfd_send_signal(self._pidfd, signum)
                except OSError:
                    pass
        except PermissionError:
            pass

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def terminate(self):
        self.send_signal(signal.SIGTERM)


def connect(path, timeout=60.0):
    """A connection to the zygote at `path`, waiting while it starts (OSError if it never answers)."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def start(zygote, entry, args, *, cwd=None, env=None, stdin=None, stdout=None, stderr=None, pass_fds=(),
          new_session=False):
    """The process that runs `entry` ("module:function") with sys.argv = [module, *args].

    With a zygote (its socket path) the process is forked from it; without one, or
    when it does not answer, it is a new interpreter (`python -P -c`), as before.
    Descriptors keep their numbers (`pass_fds`); stdin, stdout and stderr may be
    other descriptors (None: ours, stdin None: /dev/null; `subprocess.STDOUT` for
    stderr: as stdout). A forked process always leads a session of its own
    (`new_session` asks the same of a new interpreter). Returns a Child or a
    subprocess.Popen: both have pid, poll, wait, send_signal and kill.
    """
    import subprocess
    out = stdout if stdout is not None else 1
    err = out if stderr == subprocess.STDOUT else (stderr if stderr is not None else 2)
    devnull = None
    if stdin is None or stdin == subprocess.DEVNULL:
        devnull = os.open(os.devnull, os.O_RDONLY)
        stdin = devnull
    mapping = {0: stdin, 1: out, 2: err, **{fd: fd for fd in pass_fds}}
    env = dict(os.environ if env is None else env)
    try:
        if not zygote:
            raise OSError("no zygote")
        sock = connect(zygote, timeout=120)
        try:
            targets = sorted(mapping)
            _send_request(sock, {"entry": entry, "argv": [entry.partition(":")[0], *args], "env": env,
                                 "cwd": os.path.abspath(cwd or os.getcwd()), "fds": targets},
                          [mapping[t] for t in targets])
            sock.settimeout(60)
            line = b""
            while not line.endswith(b"\n"):
                chunk = sock.recv(1)
                if not chunk:
                    raise ConnectionError("the zygote closed the connection")
                line += chunk
            return Child(sock, int(json.loads(line)["pid"]))
        except BaseException:
            sock.close()
            raise
    except OSError:
        module, _, function = entry.partition(":")
        return subprocess.Popen([sys.executable, "-P", "-c", f"import sys; from {module} import {function} as f; "
                                 f"sys.argv[0] = {module!r}; sys.exit(f())", *args],
                                cwd=cwd, env=env, stdin=stdin, stdout=out, stderr=err, pass_fds=tuple(pass_fds),
                                start_new_session=new_session)
    finally:
        if devnull is not None:
            os.close(devnull)


def launch_main():
    """python -S -P -m autograder.sandbox.zygote <socket> <module:function> args...

    A stand-in for `python -P -m <module> args...` whose process is forked from the
    zygote: signals sent here go on to it, and this exits as it does.
    """
    import subprocess
    path, entry, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    parent = os.getppid()
    child = start(path, entry, args, stdin=0, stdout=1, stderr=2)
    for signum in _FORWARDED:
        signal.signal(signum, lambda s, frame: child.send_signal(s))
    # A parent killed without a word (a grading worker stopped with SIGKILL) never shuts its kernel
    # down: the child then goes too, as a child of that parent's would.
    while True:
        try:
            code = child.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:
                child.kill()
    sys.stdout.flush()
    os._exit(code if code >= 0 else 128 - code)


# --- the zygote -----------------------------------------------------------------------------------
FAILED = ".failed"  # beside the socket: the zygote could not start, and no socket will come


def _preload(spec):
    import importlib
    for name in spec["preload"]:
        importlib.import_module(name)
    for loader in spec.get("after", []):  # "module:function" run once after the imports
        module, _, function = loader.partition(":")
        getattr(importlib.import_module(module), function)()
    import threading
    if threading.active_count() > 1:  # a fork copies one thread: another one's locks would stay held
        raise SystemExit(f"zygote: the preloads started threads {threading.enumerate()}; not forking from here")


def serve():
    """python -P -c "from autograder.sandbox.zygote import serve; serve()" <socket> <spec JSON>

    spec: {"preload": [module names], "entries": ["module:function", ...], "parent": pid}.
    The zygote ends when its parent (the grading worker that started it) is gone, even if
    that happened while it was still importing.
    """
    path, spec = sys.argv[1], json.loads(sys.argv[2])
    parent = spec.get("parent") or os.getppid()
    # Stopped with SIGTERM (warm.py), it kills its children on the way out, as below: a judge, a
    # kernel or a student's process forked from here dies with it, whatever it was doing.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _preload(spec)
        listener.bind(path + ".new")  # OSError where the path is past AF_UNIX's 108 bytes
    except BaseException:
        # The requesters would wait for the socket (two minutes each): tell them it will not come.
        with open(path + FAILED, "w"):
            pass
        raise
    entries = set(spec["entries"])
    listener.listen(128)
    os.rename(path + ".new", path)  # requesters connect only once the imports are done
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children, owners = {}, {}  # pid -> connection, connection -> pid
    me = os.getuid()
    try:
        while os.getppid() == parent:
            for key, _ in selector.select(timeout=0.05):
                if key.fileobj is listener:
                    conn, _ = listener.accept()
                    request, fds = _request_of(conn, entries, me)  # up to 10 s: signals still arrive
                    # No signal between the fork and the child's own settings (it would run the
                    # zygote's handler there, or this loop's clean-up): the mask, which the child
                    # inherits, holds them. Nor an exit before the child is counted here (it would
                    # be left out of the children killed): the mask holds only what reaches this
                    # thread, and the zygote has others (the libraries it preloads start them),
                    # so a SIGTERM's exit waits for the count (_exit_held).
                    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
                    with _exit_held():
                        try:
                            pid = _fork_for(conn, request, fds, mask) if request is not None else None
                            if pid is None:
                                conn.close()
                                continue
                            children[pid], owners[conn] = conn, pid
                            selector.register(conn, selectors.EVENT_READ)
                        finally:
                            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                            _close_all(fds)
                else:  # data or EOF from a requester that still waits: it went away
                    conn = key.fileobj
                    try:
                        gone = not conn.recv(1024, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        gone = False
                    except OSError:
                        gone = True
                    if gone:
                        _kill_group(owners.get(conn))
                        selector.unregister(conn)
            _reap(children, owners, selector)
    finally:
        _kill_children(children)
        for remove in (os.unlink, os.rmdir):  # the socket, and its folder if the parent left it
            try:
                remove(path if remove is os.unlink else os.path.dirname(path))
            except OSError:
                pass


_held_exit = {"depth": 0, "signum": None}


def _exit_on_sigterm(signum, frame):
    if _held_exit["depth"]:  # within _exit_held(): at its end
        _held_exit["signum"] = signum
        return
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _exit_held():
    """A SIGTERM's exit waits for the end of the block (Python runs the handler in the main thread
    between any two steps, whichever thread the signal reached)."""
    _held_exit["depth"] += 1
    try:
        yield
    finally:
        _held_exit["depth"] -= 1
        signum = _held_exit["signum"] if not _held_exit["depth"] else None
        if signum is not None:
            _held_exit["signum"] = None
            raise SystemExit(128 + signum)


def _kill_children(children):
    for pid in list(children):
        _kill_group(pid)


def _kill_group(pid):
    """SIGKILL the child `pid` and its group, if it is still a child of this process, alive or
    not yet reaped: a SIGTERM between reaping a child and uncounting it (signals reach the main
    thread between any two steps when another thread takes them, whatever its mask) left a pid
    that may be another process's by then."""
    if pid is None:
        return
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped already
        return
    except OSError:
        pass
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except OSError:
            continue


def _reap(children, owners, selector):
    while children:
        with _exit_held():  # the pid reaped is uncounted before any exit
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = children.pop(pid, None)
        if conn is None:
            continue
        owners.pop(conn, None)
        try:
            selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        try:
            conn.sendall((json.dumps({"exit": os.waitstatus_to_exitcode(status)}) + "\n").encode())
        except OSError:
            pass
        conn.close()


def _request_of(conn, entries, me):
    """(the request a connection makes, the descriptors it passed), or (None, those descriptors)
    when it is refused: from another uid, for an entry not served here, or out of form."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    if struct.unpack("3i", creds)[1] != me:
        return None, []  # only the grader's own processes may ask
    conn.settimeout(10)
    try:
        request, fds = _receive_request(conn)
    except (OSError, ValueError):
        return None, []
    if request.get("entry") not in entries or len(fds) != len(request.get("fds", ())):
        return None, fds
    return request, fds


def _fork_for(conn, request, fds, mask):
    """Fork the child `request` asks for; its pid (None when its requester cannot be told, and
    the child is killed). `mask`: the signal mask the child takes once its handlers are its own."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _become_child(request, fds, mask)  # never returns
    try:
        conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
        return pid
    except OSError:
        _kill_group(pid)
        return None


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _become_child(request, received, mask):
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the zygote's own way out is not the child's
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal sent meanwhile arrives now
        os.setsid()
        targets = list(request["fds"])
        # Out of the way of every target first, then into place; nothing else stays open.
        base = max(targets + received) + 1
        moved = [_dup_at_least(fd, base) for fd in received]
        for fd in _open_fds():
            if fd not in moved:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for fd, target in zip(moved, targets):
            os.dup2(fd, target)
        for fd in moved:
            if fd not in targets:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        _fresh_random_state()
        module, _, function = request["entry"].partition(":")
        import importlib
        result = getattr(importlib.import_module(module), function)()
        code = result if isinstance(result, int) else 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def _dup_at_least(fd, lowest):
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD, lowest)


def _open_fds():
    return [int(name) for name in os.listdir("/proc/self/fd")]


def _fresh_random_state():
    """Random state of our own, as a new interpreter would draw it: `random` reseeds itself
    after a fork; NumPy's global generator does not."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


if __name__ == "__main__":
    launch_main()
