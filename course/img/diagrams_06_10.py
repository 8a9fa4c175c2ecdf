"""Draw the explanatory diagrams of notebooks 07 and 10 as PNGs into their assignments' img/ folders.

    python course/img/diagrams_06_10.py        (writes source/<assignment>/img/<name>.png)

The notebooks show them with markdown links (`img/<name>.png`): the folder
travels with the assignment (release, the student folder, nbgrader's exchange). They are pictures of
ideas, not measurements: every number a student should trust is measured in a
notebook cell on the student's own machine.
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

SOURCE = Path(__file__).resolve().parents[2] / "source"
FORWARD, BACKWARD = "tab:blue", "tab:orange"  # the same colours as helpers.plots.timeline_plot
COPY, WAIT, CPU = "tab:green", "0.85", "tab:purple"


def _box(ax, x, y, w, h, text, colour, *, text_colour="black", fontsize=9, alpha=0.9):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=colour, edgecolor="black", lw=0.8, alpha=alpha))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize, color=text_colour)


def _arrow(ax, start, end, text="", *, colour="black", style="-|>", offset=(0, 0.12), fontsize=8, ls="-"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=colour,
                                 lw=1.4, linestyle=ls))
    if text:
        ax.text((start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1], text,
                ha="center", va="bottom", fontsize=fontsize, color=colour)


def _bar(ax, lane, start, length, text, colour, *, height=0.6):
    ax.broken_barh([(start, length)], (lane - height / 2, height), facecolor=colour, edgecolor="black", lw=0.6)
    if text:
        ax.text(start + length / 2, lane, text, ha="center", va="center", fontsize=8)


def _blank(ax, xlim, ylim):
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.axis("off")


def gpu_execution_model(path):
    """Top: the CPU queues kernels and runs ahead until a sync point. Bottom: two streams overlap."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.6), gridspec_kw={"height_ratios": [1, 1]})

    # Top: launches are cheap and asynchronous; .item() waits for the queue to drain.
    launches = [(0.0, "mm"), (0.4, "relu"), (0.8, "mm"), (1.2, "loss")]
    for t, name in launches:
        _bar(top, 1, t, 0.3, name, CPU)
    _bar(top, 1, 1.6, 4.4, "waits at .item()  (synchronisation point)", WAIT)
    _bar(top, 1, 6.0, 0.8, "uses loss", CPU)
    gpu = [(0.35, 1.6, "mm kernel"), (1.95, 0.6, "relu"), (2.55, 1.6, "mm kernel"), (4.15, 1.8, "loss")]
    for start, length, name in gpu:
        _bar(top, 0, start, length, name, FORWARD)
    for (t, _), (start, _, _) in zip(launches, gpu):
        _arrow(top, (t + 0.15, 0.68), (start + 0.05, 0.32), colour="0.35")
    _arrow(top, (5.95, 0.3), (6.0, 0.7), "value", colour="black", offset=(0.45, -0.1))
    top.text(0.0, 1.4, "the CPU launches 4 kernels (cheap, returns at once)", fontsize=8)
    top.set_yticks([0, 1], ["GPU (one stream)", "CPU (Python)"])
    top.set_xlim(-0.1, 7.2)
    top.set_ylim(-0.6, 1.6)
    top.set_xlabel("time")
    top.set_xticks([])
    top.set_title("Kernels are queued on a stream and run later; the CPU only waits at a synchronisation point",
                  fontsize=10)

    # Bottom: with pinned memory and non_blocking=True, copies on one stream overlap compute on another.
    for j in range(4):
        _bar(bottom, 1, j * 1.5, 1.2, f"copy batch {j}", COPY)
        _bar(bottom, 0, 1.3 + j * 1.5, 1.4, f"compute {j}", FORWARD)
    bottom.set_yticks([0, 1], ["compute stream", "copy stream\n(non_blocking, pinned)"])
    bottom.set_xlim(-0.1, 7.2)
    bottom.set_ylim(-0.6, 1.6)
    bottom.set_xlabel("time")
    bottom.set_xticks([])
    bottom.set_title("Two streams: copying batch j+1 overlaps computing batch j "
                     "(each compute waits only for its own copy)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def pinned_memory_staging(path):
    """Pageable memory goes through a pinned staging buffer; pinned memory goes straight to the GPU."""
    fig, ax = plt.subplots(figsize=(10, 4.2))
    _blank(ax, (0, 10), (0, 4.4))
    ax.text(0.1, 4.15, "tensor.to('cuda') from ordinary (pageable) memory", fontsize=10, weight="bold")
    _box(ax, 0.2, 2.6, 2.4, 1.1, "pageable host memory\n(the OS may move\nor swap these pages)", "0.9")
    _box(ax, 4.0, 2.6, 2.4, 1.1, "pinned staging buffer\n(page-locked, owned\nby the CUDA driver)", "#cde8c5")
    _box(ax, 7.6, 2.6, 2.2, 1.1, "GPU memory", "#c6dbef")
    _arrow(ax, (2.65, 3.15), (3.95, 3.15), "1. CPU copies\n(costs CPU time)", colour=CPU, offset=(0, 0.1))
    _arrow(ax, (6.45, 3.15), (7.55, 3.15), "2. DMA by the\ncopy engine", colour=COPY, offset=(0, 0.1))

    ax.text(0.1, 1.85, "from pinned memory: pin_memory=True in the DataLoader, or tensor.pin_memory()",
            fontsize=10, weight="bold")
    _box(ax, 0.2, 0.3, 2.4, 1.1, "pinned host memory\n(page-locked)", "#cde8c5")
    _box(ax, 7.6, 0.3, 2.2, 1.1, "GPU memory", "#c6dbef")
    _arrow(ax, (2.65, 0.85), (7.55, 0.85),
           "one DMA copy; with non_blocking=True the CPU goes on at once", colour=COPY, offset=(0, 0.1))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def model_parallelism(path):
    """Layers on two devices, the activation crossing; then who is busy when."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.2), gridspec_kw={"height_ratios": [1.1, 1]})
    _blank(top, (0, 11), (0, 2.4))
    for i in range(4):
        _box(top, 0.3 + i * 1.05, 0.9, 0.9, 0.9, f"layer {i}", "#c6dbef", fontsize=8)
        _box(top, 6.5 + i * 1.05, 0.9, 0.9, 0.9, f"layer {i + 4}", "#fdd0a2", fontsize=8)
    top.add_patch(FancyBboxPatch((0.15, 0.7), 4.3, 1.3, boxstyle="round,pad=0.02", fill=False, ls="--"))
    top.add_patch(FancyBboxPatch((6.35, 0.7), 4.3, 1.3, boxstyle="round,pad=0.02", fill=False, ls="--"))
    top.text(2.3, 2.1, "device 0 holds layers 0-3", ha="center", fontsize=9)
    top.text(8.5, 2.1, "device 1 holds layers 4-7", ha="center", fontsize=9)
    _arrow(top, (4.6, 1.55), (6.2, 1.55), "activation, .to(device 1)", colour=FORWARD, offset=(0, 0.06))
    _arrow(top, (6.2, 1.05), (4.6, 1.05), "its gradient", colour=BACKWARD, offset=(0, -0.4))

    _bar(bottom, 1, 0, 1, "F", FORWARD)
    _bar(bottom, 0, 1, 1, "F", FORWARD)
    _bar(bottom, 0, 2, 2, "B", BACKWARD)
    _bar(bottom, 1, 4, 2, "B", BACKWARD)
    _bar(bottom, 1, 1, 3, "idle", WAIT)
    _bar(bottom, 0, 0, 1, "idle", WAIT)
    _bar(bottom, 0, 4, 2, "idle", WAIT)
    bottom.set_yticks([0, 1], ["device 1", "device 0"])
    bottom.set_xlim(-0.1, 6.1)
    bottom.set_xlabel("time (a backward pass costs about twice a forward pass)")
    bottom.set_xticks([])
    bottom.set_title("One training step: only one device works at a time", fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in (FORWARD, BACKWARD, WAIT)]
    bottom.legend(handles, ["F = forward", "B = backward", "idle"], loc="upper left",
                  bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def pipeline_parallelism(path):
    """The batch cut into micro-batches; GPipe on 2 devices with 4 micro-batches, the bubble marked."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.2), gridspec_kw={"height_ratios": [0.9, 1]})
    _blank(top, (0, 10), (0, 2))
    _box(top, 0.2, 0.5, 2.2, 1.0, "batch of B samples", "0.9")
    _arrow(top, (2.5, 1.0), (3.4, 1.0), "split", offset=(0, 0.08))
    for j in range(4):
        _box(top, 3.5 + j * 0.75, 0.5, 0.65, 1.0, f"mb {j}", "#c6dbef", fontsize=8)
    _arrow(top, (6.6, 1.0), (7.4, 1.0), "", offset=(0, 0.08))
    top.text(7.5, 1.0, "m micro-batches of B/m\nflow through the p stages\none after the other",
             va="center", fontsize=9)

    p, m = 2, 4
    for s in range(p):
        lane = p - 1 - s
        for j in range(m):
            _bar(bottom, lane, s + j, 1, f"F{j}", FORWARD)
            _bar(bottom, lane, (m + p - 1) + (p - 1 - s) + j, 1, f"B{j}", BACKWARD)
    # The bubble of stage s: s steps before its first F, 2(p-1-s) at the turn, s after its last B.
    for s in range(p):
        lane = p - 1 - s
        for start, length in ((0, s), (s + m, 2 * (p - 1 - s)), (2 * (m + p - 1) - s, s)):
            if length:
                _bar(bottom, lane, start, length, "bubble", WAIT)
    bottom.set_yticks([0, 1], ["device 1", "device 0"])
    bottom.set_xlim(-0.1, 2 * (m + p - 1) + 0.1)
    bottom.set_xlabel("time step (one pass of one micro-batch through one stage)")
    bottom.set_title(f"GPipe, p = {p} stages, m = {m} micro-batches: "
                     f"bubble = (p-1)/(m+p-1) = {(p - 1) / (m + p - 1):.2f} of each device's time", fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in (FORWARD, BACKWARD, WAIT)]
    bottom.legend(handles, ["F = forward", "B = backward", "bubble (idle)"], loc="upper left",
                  bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


DIAGRAMS = {
    "gpu_execution_model.png": gpu_execution_model,
    "pinned_memory_staging.png": pinned_memory_staging,
    "model_parallelism.png": model_parallelism,
    "pipeline_parallelism.png": pipeline_parallelism,
}


def main():
    for name, draw in DIAGRAMS.items():
        assignment = "07_pytorch_devices" if name in ("gpu_execution_model.png", "pinned_memory_staging.png") \
            else "10_model_pipeline_parallel"
        folder = SOURCE / assignment / "img"
        folder.mkdir(exist_ok=True)
        draw(folder / name)
        print("wrote", folder / name)


if __name__ == "__main__":
    main()
