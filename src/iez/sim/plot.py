"""PNG plots of simulation results: per run (OST load, streams over time, job phases) and per
scenario (the reproduction figure: one panel per metric, bars grouped as the scenario says)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from iez.report.charts import wrapped  # noqa: E402
from iez.sim.results import Results, TargetResult  # noqa: E402
from iez.sim.scenario import Figure  # noqa: E402

if TYPE_CHECKING:
    from iez.sim.study import Run

MIB = 1 << 20
UNITS = {"write_bw": ("write bandwidth (MiB/s)", 1 / MIB), "read_bw": ("read bandwidth (MiB/s)", 1 / MIB),
         "end_to_end": ("end-to-end time (s)", 1.0), "makespan": ("makespan (s)", 1.0),
         "token_wait": ("token wait (s)", 1.0)}
KIND_COLOURS = {"write": "tab:red", "read": "tab:blue", "compute": "tab:gray"}
LINES_UP_TO = 32  # more OSTs than this are drawn as a heat map


def _grid(targets: tuple[TargetResult, ...], t_end: float, bins: int = 200) -> np.ndarray:
    """Open streams per target sampled on `bins` instants."""
    ts = np.linspace(0, t_end, bins, endpoint=False)
    out = np.zeros((len(targets), bins))
    for k, t in enumerate(targets):
        if t.streams:
            times = np.array([a for a, _ in t.streams])
            counts = np.array([b for _, b in t.streams])
            idx = np.searchsorted(times, ts, side="right") - 1
            out[k] = np.where(idx >= 0, counts[np.clip(idx, 0, None)], 0)
    return out


def run_plots(res: Results, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "osts.png", out / "jobs.png"]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 7), constrained_layout=True)
    x = np.arange(len(res.osts))
    ax1.bar(x - 0.2, [o.bytes_written / MIB for o in res.osts], 0.4, label="written", color="tab:red")
    ax1.bar(x + 0.2, [o.bytes_read / MIB for o in res.osts], 0.4, label="read", color="tab:blue")
    ax1.set_xlabel("OST index")
    ax1.set_ylabel("MiB")
    ax1.set_title("bytes per OST")
    if len(res.osts) <= LINES_UP_TO:
        ax1.set_xticks(x, [o.name for o in res.osts])
    ax1.legend()
    t_end = max(res.makespan, 1e-9)
    if len(res.osts) <= LINES_UP_TO:
        for o in res.osts:
            if o.streams:
                ts = [0.0] + [a for a, _ in o.streams] + [t_end]
                ns = [0] + [b for _, b in o.streams] + [o.streams[-1][1]]
                ax2.step(ts, ns, where="post", label=f"OST {o.name}", lw=1)
        if len(res.osts) <= 16:
            ax2.legend(fontsize="x-small", ncol=4)
        ax2.set_ylabel("open streams")
    else:
        im = ax2.imshow(_grid(res.osts, t_end), aspect="auto", origin="lower", extent=(0, t_end, 0, len(res.osts)),
                        cmap="viridis", interpolation="nearest")
        fig.colorbar(im, ax=ax2, label="open streams")
        ax2.set_ylabel("OST (position)")
    ax2.set_xlabel("time (s)")
    ax2.set_title("streams per OST over time")
    fig.savefig(paths[0], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 1 + 0.4 * len(res.jobs)), constrained_layout=True)
    for k, j in enumerate(res.jobs):
        for p in j.phases:
            ax.barh(k, p.end - p.start, left=p.start, color=KIND_COLOURS.get(p.kind, "k"), edgecolor="white")
        if j.start > j.submit:
            ax.barh(k, j.start - j.submit, left=j.submit, color="none", edgecolor="k", hatch="//")
    ax.set_yticks(range(len(res.jobs)), [j.name for j in res.jobs])
    ax.set_xlabel("time (s)")
    ax.set_title("job phases (red write, blue read, grey compute, hatched: waiting for the token)")
    fig.savefig(paths[1], dpi=100)
    plt.close(fig)
    return paths


def _axis_value(run: "Run", job: str, key: str) -> Any:
    if key == "job":
        return job
    if key == "run":
        return f"{run.variant.label}: {job}" if run.variant.label != "run" else job
    if key == "variant":
        return run.variant.values.get("variant", run.variant.label)
    return run.variant.values.get(key, "")


def study_figure(fig_spec: Figure, runs: list["Run"], path: Path, footer: Sequence[str] = ()) -> Path:
    """One panel per metric; bars at x values, one colour per series value; `footer` lines
    (the comparisons with the seed) under the panels."""
    points: list[tuple[Any, Any, str, float]] = []  # (x, series, metric, value)
    for r in runs:
        for j in r.results.jobs:
            if fig_spec.job and j.name != fig_spec.job:
                continue
            for m in fig_spec.metrics:
                points.append((_axis_value(r, j.name, fig_spec.x), _axis_value(r, j.name, fig_spec.series)
                               if fig_spec.series else "", m, j.metric(m) * UNITS[m][1]))
    xs = list(dict.fromkeys(p[0] for p in points))
    series = list(dict.fromkeys(p[1] for p in points))
    n = len(fig_spec.metrics)
    width_in = max(5.0, 1.2 * len(xs) * max(1, len(series)) / 2 + 3) * n / max(1, n - 0.5)
    fig, axes = plt.subplots(1, n, figsize=(width_in, 4.5 + 0.3 * len(footer)), squeeze=False, constrained_layout=True)
    width = 0.8 / max(1, len(series))
    for ax, m in zip(axes[0], fig_spec.metrics):
        for s_k, s in enumerate(series):
            vals = []
            for x in xs:
                v = [p[3] for p in points if p[0] == x and p[1] == s and p[2] == m]
                vals.append(sum(v) / len(v) if v else 0.0)
            pos = np.arange(len(xs)) + (s_k - (len(series) - 1) / 2) * width
            ax.bar(pos, vals, width, label=str(s) if s != "" else None)
        ax.set_xticks(range(len(xs)), [str(x) for x in xs], rotation=30 if len(xs) > 4 else 0, ha="right"
                      if len(xs) > 4 else "center", fontsize="small")
        ax.set_ylabel(UNITS[m][0])
        ax.set_xlabel(fig_spec.x)
        if len(series) > 1:
            ax.legend(title=fig_spec.series, fontsize="small")
    if fig_spec.title:
        fig.suptitle(wrapped(fig, fig_spec.title))
    if footer:
        fig.supxlabel("\n".join(textwrap.fill(line, int(width_in * 13)) for line in footer), fontsize="small")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
