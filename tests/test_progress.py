"""Progress of a batch: a bar on a terminal, a few plain lines in a log."""
import io

from autograder.pipeline import progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_log_gets_a_few_plain_lines_and_the_last():
    log, clock = io.StringIO(), Clock()
    lines = progress.Lines(36, "autograde", "submission", log, clock)
    for _ in range(36):
        clock.now += 5.0  # 180 s in all: a line is due every 15 s, but at most one a tenth
        lines.update()
    lines.close()
    text = log.getvalue()
    assert "\r" not in text
    printed = text.splitlines()
    assert 2 <= len(printed) <= 11, printed
    assert printed[-1] == "autograde: 36/36 submissions (100 %), 180 s"


def test_a_fast_batch_prints_only_its_end():
    log, clock = io.StringIO(), Clock()
    with progress.Lines(3, "feedback", "submission", log, clock) as lines:
        for _ in range(3):
            clock.now += 1.0
            lines.update()
    assert log.getvalue() == "feedback: 3/3 submissions (100 %), 3 s\n"


def test_a_batch_cut_short_says_how_far_it_got():
    log, clock = io.StringIO(), Clock()
    lines = progress.Lines(10, "autograde", "submission", log, clock)
    lines.update()
    lines.write("  autograde failed for s1/01_processes_threads: see x.log")
    lines.close()
    assert log.getvalue().splitlines() == ["  autograde failed for s1/01_processes_threads: see x.log",
                                           "autograde: 1/10 submissions (10 %), 0 s"]


def test_a_terminal_gets_a_bar_and_a_file_gets_lines():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert isinstance(progress.bar(5, "autograde", stream=io.StringIO()), progress.Lines)
    bar = progress.bar(5, "autograde", stream=Terminal())
    try:
        assert not isinstance(bar, progress.Lines) and hasattr(bar, "update")
    finally:
        bar.close()
