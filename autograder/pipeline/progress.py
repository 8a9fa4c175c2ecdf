"""The progress of a batch of gradings, for whoever reads it.

On a terminal, a tqdm bar. Elsewhere (a CI log, `bin/main > main.log`, a notebook's
captured output) a bar writes one carriage return per update, and the file fills with
hundreds of overwritten bars on one line: there, plain lines instead, at most one a
tenth of the way and none closer than STEP_SECONDS apart, plus the last.
"""
import sys
import time

STEP_SECONDS = 15.0


class Lines:
    """tqdm's update/write/close, as a line now and then on a stream that is not a terminal."""

    def __init__(self, total, desc, unit, stream=None, clock=time.monotonic):
        self.total, self.desc, self.unit = total, desc, unit
        self.stream, self.clock = stream or sys.stderr, clock
        self.done, self.start = 0, clock()
        self.last_line, self.last_done = self.start, 0

    def update(self, n=1):
        self.done += n
        now = self.clock()
        tenth = max(1, -(-self.total // 10))
        if self.done >= self.total or (self.done - self.last_done >= tenth
                                       and now - self.last_line >= STEP_SECONDS):
            self._line(now)

    def write(self, text):
        print(text, file=self.stream, flush=True)

    def close(self):
        if self.done != self.last_done:
            self._line(self.clock())

    def _line(self, now):
        units = self.unit if self.total == 1 else self.unit + "s"
        percent = 100 * self.done // self.total if self.total else 100
        self.write(f"{self.desc}: {self.done}/{self.total} {units} ({percent} %), "
                   f"{now - self.start:.0f} s")
        self.last_line, self.last_done = now, self.done

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def bar(total, desc, unit="submission", stream=None):
    """A tqdm bar where `stream` (stderr) is a terminal, else Lines."""
    stream = stream or sys.stderr
    if getattr(stream, "isatty", lambda: False)():
        from tqdm.auto import tqdm
        return tqdm(total=total, desc=desc, unit=unit, file=stream)
    return Lines(total, desc, unit, stream)
