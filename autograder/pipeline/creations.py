"""The processes and threads a student's process tree creates, as the kernel reports them.

A spy inside the student's process (`_support.count_starts_and_joins`) counts
`Thread.start` and `Process.start` calls, but its record lives where the
student's code runs: an answer can find it (walking up its callers' frames, or
through `gc`) and raise the counts without starting anything. The judge
therefore also listens to Linux's process events connector (netlink,
`NETLINK_CONNECTOR`/`CN_IDX_PROC`): the kernel sends one event for every
`clone()` on the machine, naming the parent's and the child's process and
thread ids. The judge keeps those whose parent is in the student's tree, so it
counts what was created, from outside, with nothing to miss between two looks
(unlike polling /proc, where a process that lives 2 ms may never be seen).

Listening needs CAP_NET_ADMIN in the machine's first network namespace: the
grader running as root (student code never does). Elsewhere `available` is
False and the checks fall back to the spy's counts, and the judge's log says so.
What holds there too is a bound: every thread or process created takes the next
id the kernel hands out, in the judge's pid namespace as in any namespace nested
in it, so the ids handed out on the whole machine meanwhile (`ids_handed_out`,
from /proc/loadavg) are at least the creations the student's tree made: a spy
whose counts exceed them was edited.
"""
import os
import select
import socket
import struct
import threading

NETLINK_CONNECTOR, CN_IDX_PROC, CN_VAL_PROC = 11, 1, 1
PROC_CN_MCAST_LISTEN, PROC_CN_MCAST_IGNORE = 1, 2
PROC_EVENT_FORK = 0x00000001
NLMSG_DONE = 3
_NLMSG_HEADER = struct.Struct("=IHHII")          # length, type, flags, seq, pid
_CN_MSG = struct.Struct("=IIIIHH")               # idx, val, seq, ack, length, flags
_EVENT_HEADER = struct.Struct("=IIQ")            # what, cpu, timestamp
_FORK = struct.Struct("=IIII")                   # parent pid, parent tgid, child pid, child tgid
_EVENT_AT = _NLMSG_HEADER.size + _CN_MSG.size
_RECEIVE_BUFFER = 8 << 20                        # machine-wide events for the length of one call
PROBE_SECONDS = 2.0


class Creations:
    """What the kernel reported while the block ran: `processes` and `threads` created by the
    tree, `process_ids` (those processes' ids), `thread_owners` (each new thread's id -> the id
    of the process it was created in),
    `available` (False: no events here, use the spy alone), `lost` (the socket overflowed:
    the counts are a lower bound), `ids_handed_out` (the process and thread ids the kernel
    handed out meanwhile, to anyone: an upper bound of the tree's creations; None if unknown)."""

    def __init__(self):
        self.available, self.lost = False, False
        self.processes, self.threads = 0, 0
        self.process_ids = set()
        self.thread_owners = {}
        self.ids_handed_out = None


class watch_creations:
    """with watch_creations(pid, tree_pids) as made: <calls> -> made.processes, made.threads.

    `tree_pids`: the process ids already in the student's tree (its live descendants): a
    creation counts when its parent process is one of them or was created during the block.
    """

    def __init__(self, pid, tree_pids=()):
        self.tree = {pid, *tree_pids}
        self.made = Creations()
        self._heard = threading.Event()
        self._socket, self._thread = None, None
        self._stop_read, self._stop_write = None, None

    def __enter__(self):
        self._first_id = last_id()
        try:
            self._socket = _listen()
        except OSError:
            return self.made  # not root, or not in the first network namespace: the spy alone
        self._stop_read, self._stop_write = os.pipe()
        self._thread = threading.Thread(target=self._read, name="creations", daemon=True)
        self._thread.start()
        # The reader thread's own creation is the probe: events reach this socket (a namespace
        # the kernel does not report to would give none) once the kernel has sent it.
        self.made.available = self._heard.wait(PROBE_SECONDS)
        return self.made

    def __exit__(self, *exc):
        self.made.ids_handed_out = ids_between(self._first_id, _read_last_id())
        if self._socket is not None:
            os.write(self._stop_write, b"x")
            self._thread.join()
            self._socket.close()
            os.close(self._stop_read)
            os.close(self._stop_write)
        return False

    def _read(self):
        while True:
            ready, _, _ = select.select([self._socket, self._stop_read], [], [])
            if self._socket in ready:
                self._drain()
            if self._stop_read in ready:
                self._drain()  # what the kernel sent before the block ended
                return

    def _drain(self):
        while True:
            try:
                data = self._socket.recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:  # ENOBUFS: events were dropped
                self.made.lost = True
                continue
            self._take(data)

    def _take(self, data):
        offset = 0
        while offset + _NLMSG_HEADER.size <= len(data):
            length = _NLMSG_HEADER.unpack_from(data, offset)[0]
            if length < _NLMSG_HEADER.size:
                return
            at = offset + _EVENT_AT
            if at + _EVENT_HEADER.size + _FORK.size <= offset + length:
                what = _EVENT_HEADER.unpack_from(data, at)[0]
                if what == PROC_EVENT_FORK:
                    _, parent_tgid, child_pid, child_tgid = _FORK.unpack_from(data, at + _EVENT_HEADER.size)
                    self._fork(parent_tgid, child_pid, child_tgid)
            offset += (length + 3) & ~3

    def _fork(self, parent_tgid, child_pid, child_tgid):
        # A new thread's parent, as the kernel reports it, is its process's parent (CLONE_THREAD
        # shares real_parent): a thread is recognised by its process, a process by its parent.
        if child_pid != child_tgid:
            if child_tgid == os.getpid():
                self._heard.set()
            if child_tgid in self.tree:
                self.made.threads += 1
                self.made.thread_owners.setdefault(child_pid, set()).add(child_tgid)
        elif parent_tgid in self.tree:
            self.tree.add(child_tgid)  # a new process: its own creations count too
            self.made.processes += 1
            self.made.process_ids.add(child_tgid)


def last_id():
    """The last process or thread id the kernel handed out in this process's pid namespace
    (the fifth field of /proc/loadavg), or None where it cannot be read or is not the kernel's
    (see _kernels_loadavg)."""
    if not _kernels_loadavg():
        return None
    first = _read_last_id()
    probe = threading.Thread(target=int)  # takes an id: the kernel's counter must show it
    probe.start()
    probe.join()
    last = _read_last_id()
    if first is None or last is None or ids_between(first, last) in (None, 0):
        return None
    return first


def _read_last_id():
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[4])
    except (OSError, ValueError, IndexError):
        return None


_LOADAVG_MOUNTED_OVER = []


def _kernels_loadavg():
    """False where a file is mounted over /proc/loadavg (LXCFS does, in LXC containers: its
    fifth field is then the largest id alive in the container, refreshed every 5 s, which
    would count no short-lived thread). The probe in last_id() catches what this misses."""
    if not _LOADAVG_MOUNTED_OVER:
        try:
            with open("/proc/self/mountinfo") as f:
                over = any(line.split()[4] == "/proc/loadavg" for line in f)
        except (OSError, IndexError):
            over = True
        _LOADAVG_MOUNTED_OVER.append(over)
    return not _LOADAVG_MOUNTED_OVER[0]


def ids_between(first, last):
    """How many ids were handed out after `first` up to `last` at most: ids go up by one per
    creation, skipping those in use, and start again low after pid_max (the count then comes
    out higher than the truth, never lower). None where either is unknown."""
    if first is None or last is None:
        return None
    if last >= first:
        return last - first
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
    except (OSError, ValueError):
        return None
    return last + pid_max - first


def _listen():
    """A netlink socket subscribed to the kernel's process events (OSError where not allowed)."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
    try:
        try:
            sock.setsockopt(socket.SOL_SOCKET, 33, _RECEIVE_BUFFER)  # SO_RCVBUFFORCE (root)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECEIVE_BUFFER)
        sock.bind((0, CN_IDX_PROC))
        operation = struct.pack("=I", PROC_CN_MCAST_LISTEN)
        message = _CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(operation), 0) + operation
        sock.send(_NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(message), NLMSG_DONE, 0, 0, 0) + message)
    except OSError:
        sock.close()
        raise
    return sock
