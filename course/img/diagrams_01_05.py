"""Draw the explanatory diagrams of notebooks 01-05 as PNGs into their assignments' img/ folders.

    python course/img/diagrams_01_05.py

Writes cores_hyperthreads.png and process_thread_memory.png (source/01_processes_threads/img/)
and gil_timeline.png (source/02_gil/img/). The notebooks show them with markdown image
links (img/<name>.png): the folder travels with the assignment (release, the student
folder, nbgrader's exchange). Re-run this after changing a drawing, then release, and
commit the PNGs. Pictures only: no number here is a measurement.
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

SOURCE = Path(__file__).resolve().parents[2] / "source"
DPI = 110


def _out(assignment, name):
    """source/<assignment>/img/<name>, the folder made if need be."""
    folder = SOURCE / assignment / "img"
    folder.mkdir(exist_ok=True)
    return folder / name


def box(ax, x, y, w, h, text="", colour="#dddddd", edge="black", fontsize=9, **kw):
    """A rounded box with centred text, in axes data coordinates."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=colour, edgecolor=edge, linewidth=1.2, **kw))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


def blank(width, height):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(0, width * 10)
    ax.set_ylim(0, height * 10)
    ax.axis("off")
    return fig, ax


def cores_hyperthreads():
    """One chip, 2 physical cores, 2 hardware threads each = 4 logical CPUs."""
    fig, ax = blank(8, 4.2)
    box(ax, 2, 4, 56, 33, colour="#f4f4f4")
    ax.text(30, 34.5, "one CPU chip (socket)", ha="center", fontsize=11, weight="bold")
    for core in range(2):
        x = 5 + core * 27
        box(ax, x, 7, 23, 24, colour="#cfe2f3")
        ax.text(x + 11.5, 28, f"physical core {core}", ha="center", fontsize=10, weight="bold")
        box(ax, x + 2, 16, 19, 7, "execution units, caches\n(shared by its 2 threads)",
            colour="#9fc5e8", fontsize=8)
        for t in range(2):
            cpu = 2 * core + t
            box(ax, x + 2 + t * 10, 9, 9, 5.5, f"logical\nCPU {cpu}", colour="#ffe599", fontsize=8)
    ax.text(61, 30, "os.cpu_count() = 4 logical CPUs", fontsize=10)
    ax.text(61, 25, "psutil.cpu_count(logical=False)\n  = 2 physical cores", fontsize=10)
    ax.text(61, 16, "usable = CPUs in the affinity mask,\n  lowered by a cgroup CPU quota\n"
            "  (taskset, Slurm, docker --cpus)", fontsize=10)
    ax.text(61, 7, "Two logical CPUs of one core share\nits units: far less than 2x speed\n"
            "for number crunching.", fontsize=10, color="#990000")
    fig.savefig(_out("01_processes_threads", "cores_hyperthreads.png"), dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def process_thread_memory():
    """Two processes, each with its own memory; threads inside one share it."""
    fig, ax = blank(9, 4.2)
    for i, (x, title, threads) in enumerate([(2, "process A (PID 1001)", 3),
                                             (51, "process B (PID 1002)", 1)]):
        box(ax, x, 3, 37, 36, colour="#f4f4f4")
        ax.text(x + 18.5, 36, title, ha="center", fontsize=11, weight="bold")
        box(ax, x + 2, 21, 33, 11, "its own memory: globals, lists,\nimported modules, open files",
            colour="#b6d7a8", fontsize=9)
        width = 33 / threads
        for t in range(threads):
            tx = x + 2 + t * width
            box(ax, tx + 0.5, 6, width - 1, 10, f"thread {t}\n(own stack)", colour="#ffe599", fontsize=8)
            ax.annotate("", xy=(tx + width / 2, 21), xytext=(tx + width / 2, 16),
                        arrowprops=dict(arrowstyle="<->", color="#38761d", lw=1.5))
    ax.annotate("", xy=(51, 26.5), xytext=(39, 26.5),
                arrowprops=dict(arrowstyle="<->", color="#990000", lw=2, linestyle="--"))
    ax.text(45, 29, "no shared\nmemory", ha="center", fontsize=8, color="#990000")
    ax.text(45, 15, "they talk through\npipes, queues or\nshared memory", ha="center", fontsize=8,
            color="#444444")
    ax.text(45, 0.2, "Threads of one process read and write the same objects;"
            " a process gets a copy (fork) or starts fresh (spawn).", ha="center", fontsize=9)
    fig.savefig(_out("01_processes_threads", "process_thread_memory.png"), dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def gil_timeline():
    """Who runs Python bytecode when: 2 threads under the GIL vs 2 processes."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.5, 3.8), sharex=True)
    interval, total = 5, 40
    colours = {"runs": "#6aa84f", "waits": "#e06666", "io": "#9fc5e8"}
    for t in range(2):
        for start in range(0, total, interval):
            holder = (start // interval) % 2
            state = "runs" if holder == t else "waits"
            top.broken_barh([(start, interval)], (t - 0.35, 0.7), color=colours[state])
    top.set_yticks([0, 1], ["thread 1", "thread 2"])
    top.set_title("2 threads, one process: one GIL, they take turns (switch interval 5 ms)", fontsize=10)
    for p in range(2):
        bottom.broken_barh([(0, total / 2)], (p - 0.35, 0.7), color=colours["runs"])
    bottom.set_yticks([0, 1], ["process 1", "process 2"])
    bottom.set_title("2 processes: one GIL each, both run at once (with 2 free cores)", fontsize=10)
    bottom.set_xlabel("time (ms, schematic)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[k]) for k in ("runs", "waits")]
    fig.legend(handles, ["holds the GIL: runs Python", "waits for the GIL"], loc="lower center",
               ncol=2, fontsize=9, bbox_to_anchor=(0.5, -0.04))
    for ax in (top, bottom):
        ax.set_xlim(0, total)
        ax.set_ylim(-0.6, 1.6)
    fig.tight_layout()
    fig.savefig(_out("02_gil", "gil_timeline.png"), dpi=DPI, bbox_inches="tight")
    plt.close(fig)


def main():
    cores_hyperthreads()
    process_thread_memory()
    gil_timeline()
    for assignment, name in (("01_processes_threads", "cores_hyperthreads"),
                             ("01_processes_threads", "process_thread_memory"), ("02_gil", "gil_timeline")):
        print("wrote", _out(assignment, f"{name}.png"))


if __name__ == "__main__":
    main()
