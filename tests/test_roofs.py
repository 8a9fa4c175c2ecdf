"""helpers/roofs.py: the throughput of several processes is divided by the time they really took."""
import time

from helpers import roofs


def test_throughput_counts_the_time_of_its_last_pass(monkeypatch):
    # A slow pass (a large array on a busy machine): it starts before `duration` is up and ends
    # long after. Dividing its bytes by `duration` would report three times the real rate.
    monkeypatch.setattr(roofs, "triad", lambda a, b, c, s: time.sleep(0.15))
    n, duration = 1000, 0.05
    moved, started, seconds = roofs.throughput((n, time.time(), duration))
    assert moved == 5 * n * 8            # one pass
    assert seconds >= 0.15
    rate = roofs.combined_rate([(moved, started, seconds)])
    assert rate <= moved / 0.15
    assert rate < 0.5 * moved / duration


def test_a_team_rate_spans_from_the_first_start_to_the_last_end():
    runs = [(100, 1000.0, 1.0), (300, 1000.5, 1.0)]   # (bytes, started, seconds)
    assert roofs.combined_rate(runs) == 400 / 1.5
