"""Catalogued answers judged as in grading, without a notebook: the hidden checks here (the judge's
role), the answer in a student's process of its own on top of the reference solutions of the other
exercises (autograder/pipeline/judge.py). The course's tests judge the catalogue with it
(tests/conftest.py's `judge` fixture), and so does tests/gpu_machine/ on a machine with a GPU and
without Jupyter: it imports nothing of nbgrader's."""
import time


class Judge:
    """judge(assignment, exercise, code=None, until_failure=False): the Outcomes of `exercise`'s
    hidden checks for `code` as its answer (None: the reference), holding the test run's lease on
    the machine as the judge does (timing checks alone). One student's process per assignment,
    started again when an answer stops it."""

    def __init__(self):
        self.sessions, self.references = {}, {}

    def session(self, assignment, sessions=None):
        from ..pipeline.judge import StudentProcess
        sessions = self.sessions if sessions is None else sessions
        session = sessions.get(assignment)
        if session is None or session.broken or session.process.poll() is not None:
            if session is not None:
                session.stop()  # what is left of it: its temp folder
            session = sessions[assignment] = StudentProcess.for_reference(assignment)
        return session

    def reference(self, assignment, exercise):
        """The reference solutions, in a process no answer has been loaded into (as in grading)."""
        session = self.session(assignment, self.references)
        return session, session.namespace()

    def __call__(self, assignment, exercise, code=None, until_failure=False):
        from .. import hidden
        from ..pipeline import lease
        from ..sandbox import student as student_side
        from ..sandbox import wire
        session = self.session(assignment)
        # Loaded, even where the answer left on what would see the reads and its process refuses the
        # reply: grading sends none for loading, and the checks that follow say why they fail.
        try:
            session.run(student_side.use_candidate, assignment, exercise, code)
        except AssertionError as err:
            if not str(err).startswith(wire.LEFT_ON):
                raise
        namespace = session.namespace()
        hidden.STUDENT = session
        try:
            return hidden.run(assignment, exercise, namespace, session=session, hold=lease.hold,
                              until_failure=until_failure, reference=self.reference)
        finally:
            hidden.STUDENT = None
            # An answer that replaced what grading relies on (a forged threadpoolctl, say), or left
            # processes or threads that keep a core busy (a forged worker spinning since import),
            # leaves its process to no other answer, as in grading, where each submission has its own.
            if code is not None and not session.broken and _changed(session):
                session.stop("replaced what grading relies on")
            if code is not None and not session.broken and keeps_a_core_busy(session):
                session.stop("left work running that keeps a core busy")
            if code is not None and not session.broken and _left_a_torch_mode_on(session):
                session.stop("left a torch mode on, under which no later answer's results are sent")

    def stop(self):
        for session in [*self.sessions.values(), *self.references.values()]:
            session.stop()
        self.sessions.clear()
        self.references.clear()


def _changed(session):
    """Whether the answer replaced what grading relies on; True where its process has ended (its
    checks have failed on that already: it is started again for the next answer)."""
    from ..pipeline.judge import StudentProcessGone
    try:
        return session.changed()
    except StudentProcessGone:
        return True


def _left_a_torch_mode_on(session):
    """Whether the answer left a torch mode on in its process (the process refuses to reply to
    any request that runs code while one is: wire.refuse_lingering_modes); True where its process
    has ended."""
    from ..pipeline.judge import StudentProcessGone
    from ..sandbox import wire
    try:
        session.run(wire.lingering_modes)
    except AssertionError:
        return True
    except StudentProcessGone:
        return True
    return False


def keeps_a_core_busy(session, looks=5, every=0.1, settle=0.5):
    """Whether what an answer left in its student's process tree keeps a core busy: some thread of
    the tree is running or waiting for a core (state R) now, and at each of `looks` looks, `every`
    seconds apart, once `settle` seconds have passed (what winds down after a call,
    workers shutting down or BLAS threads spinning before they sleep, has ended by then). A thread
    that spins is in state R however busy the machine is, a thread that waits is not: so the
    answer is the same on an idle and on a loaded machine. The idle process with no child and one
    thread is not looked at: it waits for the judge's next request. A spinner left by one answer
    would otherwise take a core from every answer judged after it in the same process (the
    module's judge keeps it), and from the other tests of the run."""
    from ..pipeline.judge import ProcessTree
    tree = ProcessTree(session.pid)
    members = tree.members()
    if len(members) <= 1 and members.get(session.pid, {}).get("threads", 1) <= 1:
        return False
    running = set(_running_threads(tree))  # nothing running now: nothing spins (most answers)
    for look in range(looks):
        if not running:
            return False
        time.sleep(settle if look == 0 else every)
        running &= set(_running_threads(tree))
    return bool(running)


def _running_threads(tree):
    """(pid, thread id) of the tree's threads in state R."""
    return {(pid, tid) for pid in tree.members() for tid, state in tree.thread_states(pid).items() if state == "R"}
