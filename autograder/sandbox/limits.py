"""What the grading process asks of a submission's sandbox, as it travels to it (an environment variable)."""
import json
import os
import sys
from dataclasses import asdict, dataclass, field

ENV = "COURSE_SANDBOX"


@dataclass
class Limits:
    memory_mb: int = 6144          # per submission: kernel, its workers and the student's process each
    max_processes: int = 256       # processes and threads at once, per submission
    max_file_mb: int = 512         # the largest file a process may write (RLIMIT_FSIZE), MiB
    network: bool = False          # False: no network but loopback
    gpus: bool = False             # True: student code may use the grader's GPUs (needs a memory cgroup)
    protect_files: bool = True
    covered: list = field(default_factory=list)    # folders replaced by empty ones
    allowed: list = field(default_factory=list)    # paths inside them that come back read-only
    writable: str = ""                             # the one folder left writable
    uid: int = -1                                  # unprivileged uid/gid to run as (-1: keep)
    cgroups: dict = field(default_factory=dict)    # controller -> cgroup folder to join

    def to_env(self):
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls):
        raw = os.environ.get(ENV)
        return cls(**json.loads(raw)) if raw else None


SECRET_VARIABLES = ("COURSE_DB_URL", "PGPASSWORD", "COURSE_SCHEDULER")


def is_secret(name):
    """Whether an environment variable is the grader's to know (a gradebook password), never student code's."""
    return name in SECRET_VARIABLES or any(word in name for word in ("PASSWORD", "TOKEN", "SECRET"))


def without_secrets(env):
    """`env` less the grader's secrets. Processes that run student code must be started with
    this: what a process was started with stays readable in /proc/self/environ, whatever
    it later removes from os.environ."""
    return {name: value for name, value in env.items() if not is_secret(name)}


# Where the grader's own machinery is (its zygotes, its lease on the machine): the judge
# needs them, student code never does.
GRADER_ONLY = ("COURSE_LEASE", "COURSE_ZYGOTE", "COURSE_ZYGOTE_SANDBOX", "COURSE_ZYGOTE_JUDGE", "COURSE_ZYGOTE_FOR")


def for_student_code(env):
    """The environment a process that runs student code is started with: no secrets, nothing of
    the grader's machinery."""
    return {name: value for name, value in without_secrets(env).items() if name not in GRADER_ONLY}


def note(message):
    print(f"[sandbox] {message}", file=sys.stderr, flush=True)
