"""The course's plots: speedup curves, worker timelines, bar charts."""
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator


def speedup_plot(workers, speedups, *, usable=None, label="measured",
                 title="Speedup against one worker", ax=None, xlabel="workers"):
    """Measured speedup vs workers (or threads: `xlabel`), with the ideal line (Amdahl's curve is
    yours to draw: it is an exercise of assignment 05)."""
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    workers = np.asarray(workers, dtype=float)
    ax.plot(workers, speedups, "o-", label=label)
    ax.plot(workers, workers, "--", color="grey", label=f"ideal (speedup = {xlabel})")
    if usable:
        ax.axvline(usable, color="tab:green", alpha=0.4, label=f"usable cores ({usable})")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no 1.5 workers
    ax.set_xlabel(xlabel)
    ax.set_ylabel("speedup")
    ax.set_title(title)
    ax.legend()
    return ax


def times_plot(workers, seconds, *, title="Time against workers", usable=None, ax=None):
    """Measured time vs workers, with the ideal 1/x line through the first point (and a line at
    the usable cores, when given); the time axis starts at 0, so that heights compare."""
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    workers = np.asarray(workers, dtype=float)
    ax.plot(workers, seconds, "o-", label="measured")
    ax.plot(workers, seconds[0] * workers[0] / workers, "--", color="grey", label="ideal (1/x)")
    if usable is not None:
        ax.axvline(usable, color="tab:green", alpha=0.4, label=f"usable cores ({usable})")
    ax.set_ylim(bottom=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("workers")
    ax.set_ylabel("seconds")
    ax.set_title(title)
    ax.legend()
    return ax


# Fixed colours for the passes of a pipeline: the same in every chart and every run.
KIND_COLOURS = {"F": "tab:blue", "B": "tab:orange"}
KIND_NAMES = {"F": "F = forward", "B": "B = backward"}
_OTHER_COLOURS = ["tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
                  "tab:cyan", "tab:gray"]


def _colour_key(event):
    """What decides an event's colour: its "kind", else its label's letters ("F3" -> "F"), else its lane."""
    if event.get("kind") is not None:
        return str(event["kind"])
    label = str(event.get("label") if event.get("label") is not None else "")
    letters = label.rstrip("0123456789").strip()
    return letters or str(event["lane"])


def timeline_colours(keys):
    """A fixed colour for each key: F and B always blue and orange, the others in sorted order."""
    others = sorted(k for k in set(keys) if k not in KIND_COLOURS)
    mapping = {k: KIND_COLOURS[k] for k in set(keys) if k in KIND_COLOURS}
    mapping.update({k: _OTHER_COLOURS[i % len(_OTHER_COLOURS)] for i, k in enumerate(others)})
    return mapping


def timeline_plot(events, *, title="Who ran what, and when", ax=None, legend=True):
    """Gantt chart of work items. events: dicts with lane, start, end and optional label and kind.

    `lane` is what ran the item (a PID, a thread name, a device); times are in
    seconds and are shown relative to the earliest start. Colours come from a
    fixed mapping (timeline_colours), so they are the same in every run: by the
    event's `kind`, else by the letters of its label ("F3" and "F0" alike), else
    by lane. The legend names the colours when they say more than the lanes do.
    """
    ax = ax or plt.subplots(figsize=(8, 0.6 + 0.45 * len({e["lane"] for e in events})))[1]
    lanes = sorted({e["lane"] for e in events}, key=str)
    origin = min(e["start"] for e in events)
    keys = [_colour_key(e) for e in events]
    colours = timeline_colours(keys)
    for event, key in zip(events, keys):
        row = lanes.index(event["lane"])
        start = event["start"] - origin
        ax.broken_barh([(start, event["end"] - event["start"])], (row - 0.4, 0.8),
                       color=colours[key], alpha=0.85)
        if event.get("label") is not None:
            ax.text(start + (event["end"] - event["start"]) / 2, row, str(event["label"]),
                    ha="center", va="center", fontsize=7)
    if legend and set(keys) != {str(lane) for lane in lanes}:
        order = [k for k in KIND_COLOURS if k in colours] + sorted(k for k in colours if k not in KIND_COLOURS)
        handles = [plt.Rectangle((0, 0), 1, 1, color=colours[k], alpha=0.85) for k in order]
        names = [KIND_NAMES.get(k, k) for k in order]
        ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_yticks(range(len(lanes)), [str(lane) for lane in lanes])
    ax.set_xlabel("seconds since the first start")
    ax.set_title(title)
    return ax


def bar_chart(values, *, ylabel="seconds", title="", log=False, ax=None):
    """Bars for {name: value}, labelled with the values."""
    ax = ax or plt.subplots(figsize=(max(5, 0.9 * len(values)), 4))[1]
    names = list(values)
    bars = ax.bar(names, [values[n] for n in names], color="tab:blue")
    ax.bar_label(bars, fmt="%.3g", fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=30)
    return ax
