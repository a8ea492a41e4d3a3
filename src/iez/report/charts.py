"""Charts in the style of seed 000: per-OST (docs/references.md#s000-figs7-9) and per-OSS
(#s000-fig11) utilization per policy, and OSTCost per scenario. Uses matplotlib's Agg canvas directly (no pyplot state), so
it is safe in servers and threads."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from iez.alloc.registry import DEFAULT_POLICY, names

# One colour per policy, the same in every picture iez draws: matplotlib's tab10 from its orange
# on, by the policy's place in the policy table (rr, qos, iez-paper, balanced, then any new one).
PALETTE = ("#ff7f0e", "#2ca02c", "#d62728", "#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
ALIASES = {"default": "rr", "iez": DEFAULT_POLICY}  # the demo's two sides: Lustre's allocator and iez's
REF_MARKERS = ("v", "^", "D", "s")  # grouped_bars' reference points, one shape per series
BARS_UP_TO = 64  # targets; beyond, bars get thinner than a pixel and per-target labels unreadable


def policy_color(name: str) -> str | None:
    """The colour of a policy's bars; None (matplotlib's next) for a name no policy has."""
    order = names()
    name = ALIASES.get(name, name)
    return PALETTE[order.index(name) % len(PALETTE)] if name in order else None


@dataclass(frozen=True)
class Series:
    """One policy's bars: utilization per target (job, total) and the OSTCost of each."""

    job: list[float]
    total: list[float]
    job_cost: float
    total_cost: float


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def utilization_chart(path: Path, title: str, labels: list[str], series: dict[str, Series], xlabel: str,
                      noun: str) -> None:
    """Grouped bars, one series per policy: job utilization above, total usage below (in %).
    With more than BARS_UP_TO targets, each policy is a curve of its targets sorted by
    utilization instead: the spread and the maximum stay visible where bars would not."""
    n, k = len(labels), max(1, len(series))
    bars = n <= BARS_UP_TO
    width_in = max(7.0, min(18.0, 0.45 * n * max(1, k / 2) + 2)) if bars else 11.0
    fig = _figure(width_in, 7.5)
    axes = fig.subplots(2, 1, sharex=True)
    width = 0.8 / k
    xs = list(range(n))
    panels = ((axes[0], "job", "job bytes / capacity (%)"), (axes[1], "total", "total used / capacity (%)"))
    for ax, which, ylabel in panels:
        for j, (name, s) in enumerate(series.items()):
            vals = [100 * v for v in getattr(s, which)]
            label = f"{name} (cost {getattr(s, which + '_cost'):.3f})"
            if bars:
                ax.bar([x - 0.4 + width * (j + 0.5) for x in xs], vals, width, label=label,
                       color=policy_color(name), edgecolor="black", linewidth=0.4)
            else:
                ax.plot(xs, sorted(vals, reverse=True), label=label, color=policy_color(name), linewidth=1.6)
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", alpha=0.35)
        ax.set_axisbelow(True)
        top = max((100 * v for s in series.values() for v in getattr(s, which)), default=0)
        ax.set_ylim(0, top * 1.25 or 1)  # headroom so the legend sits above the bars
        ax.legend(ncols=min(k, 4), loc="upper right", fontsize="small")
    axes[0].set_title(wrapped(fig, title))
    if bars:
        axes[1].set_xticks(xs, labels, rotation=90 if n > 20 else 0, fontsize="small")
        axes[1].set_xlabel(xlabel)
    else:
        axes[1].set_xlabel(f"{noun} of each policy, sorted from most to least utilized ({n} in all)")
    axes[1].set_xlim(-0.6, n - 0.4)
    fig.savefig(path, dpi=110)


def wrapped(fig, title: str) -> str:
    """A title broken into lines that fit the figure's width (a long one ran off the page)."""
    return textwrap.fill(title, int(fig.get_figwidth() * 11))


def grouped_bars(path: Path, title: str, labels: list[str], series: dict[str, list[float]], ylabel: str,
                 reference: dict[str, list[float | None]] | None = None, baseline: float | None = None) -> None:
    """One group of bars per label (e.g. scenario), one bar per series (e.g. policy); optional
    reference markers (e.g. the paper's figures) drawn over the bars, in each series' colour and
    with its own shape (REF_MARKERS)."""
    n, k = len(labels), max(1, len(series))
    fig = _figure(max(8.0, min(18.0, 0.9 * n + 3)), 5.5)
    ax = fig.subplots()
    width = 0.8 / k
    for j, (name, vals) in enumerate(series.items()):
        xs = [x - 0.4 + width * (j + 0.5) for x in range(n)]
        ax.bar(xs, vals, width, label=name, color=policy_color(name), edgecolor="black", linewidth=0.4)
        ref = (reference or {}).get(name)
        if ref:
            pts = [(x, r) for x, r in zip(xs, ref) if r is not None]
            if pts:  # in the series' colour with its own marker, so each reference reads as its bars'
                ax.scatter(*zip(*pts), marker=REF_MARKERS[j % len(REF_MARKERS)], s=70, color=policy_color(name),
                           edgecolors="black", linewidths=1.0, zorder=3, label=f"{name}: paper")
    if baseline is not None:
        ax.axhline(baseline, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(n), labels, rotation=30, ha="right", fontsize="small")
    ax.set_ylabel(ylabel)
    ax.set_title(wrapped(fig, title))
    ax.grid(axis="y", alpha=0.35)
    ax.set_axisbelow(True)
    ax.legend(fontsize="small", ncols=2)
    fig.savefig(path, dpi=110)
