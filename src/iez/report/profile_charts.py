"""LIOPProf pictures in the style of seed 003: per-OST RPC counts per client
(docs/references.md#s003-figs4-5), per-OST RPCs over time stacked by client (#s003-figs10-15), clients served at once, RPC classes per OSS,
lock traffic per client and disk utilization. Plain data in, one PNG out."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from iez.report.charts import _figure

MAX_LAYERS = 8  # clients drawn one by one; the rest are summed as "others"
MAX_PANELS = 24  # small multiples; beyond, a heatmap
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf"]


def _colors(names: list[str]) -> dict[str, str]:
    return {n: ("#c7c7c7" if n == "others" else _PALETTE[i % len(_PALETTE)]) for i, n in enumerate(names)}


def _grid(n: int) -> tuple[int, int]:
    cols = min(4, n) if n > 1 else 1
    return math.ceil(n / cols), cols


def per_ost_client_bars(path: Path, title: str, per_ost: dict[str, dict[str, float]], ylabel: str) -> None:
    """docs/references.md#s003-figs4-5: for each OST, its RPCs from each client (bars); a heatmap OST x
    client when there are too many OSTs for small multiples."""
    osts = list(per_ost)
    clients = sorted({c for d in per_ost.values() for c in d})
    if len(osts) > MAX_PANELS:
        m = np.array([[per_ost[o].get(c, 0.0) for c in clients] for o in osts])
        fig = _figure(min(18, 3 + 0.25 * len(clients)), min(18, 2 + 0.22 * len(osts)))
        ax = fig.subplots()
        im = ax.imshow(m, aspect="auto", cmap="viridis", interpolation="nearest")
        ax.set_yticks(range(len(osts)), osts, fontsize="x-small")
        ax.set_xticks(range(len(clients)), clients, rotation=90, fontsize="x-small")
        ax.set_xlabel("client")
        fig.colorbar(im, ax=ax, label=ylabel)
        ax.set_title(title)
        fig.savefig(path, dpi=110)
        return
    rows, cols = _grid(max(1, len(osts)))
    fig = _figure(3.6 * cols + 0.5, 2.7 * rows + 0.8)
    axes = np.atleast_1d(fig.subplots(rows, cols, sharey=True, squeeze=False)).ravel()
    color = _colors(clients)
    top = max((v for d in per_ost.values() for v in d.values()), default=1) or 1
    for ax, ost in zip(axes, osts):
        vals = [per_ost[ost].get(c, 0.0) for c in clients]
        ax.bar(range(len(clients)), vals, color=[color[c] for c in clients], edgecolor="black", linewidth=0.3)
        served = sum(1 for v in vals if v > 0)
        ax.set_title(f"{ost}: {served} client{'s' if served != 1 else ''}", fontsize="medium")
        ax.set_ylim(0, top * 1.1)
        ax.grid(axis="y", alpha=0.35)
        ax.set_axisbelow(True)
        if len(clients) <= 12:
            ax.set_xticks(range(len(clients)), clients, rotation=45, ha="right", fontsize="x-small")
        else:
            ax.set_xticks([])
            ax.set_xlabel(f"{len(clients)} clients", fontsize="small")
    for ax in axes[len(osts):]:
        ax.set_visible(False)
    for ax in axes[::cols]:
        ax.set_ylabel(ylabel)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)


def stacked_panels(path: Path, title: str, times: np.ndarray, panels: dict[str, dict[str, np.ndarray]],
                   ylabel: str, xlabel: str = "seconds since the profile start") -> None:
    """docs/references.md#s003-figs10-15: one panel per OST (or OSS), its RPCs per time bin as filled
    curves stacked by client (or class). Layers keep one colour across panels."""
    names = list(panels)
    totals: dict[str, float] = {}
    for layers in panels.values():
        for k, v in layers.items():
            totals[k] = totals.get(k, 0.0) + float(np.sum(v))
    keep = sorted(totals, key=lambda k: -totals[k])[:MAX_LAYERS]
    color = _colors(sorted(keep) + ["others"])  # the same colours as per_ost_client_bars
    shown = names[:MAX_PANELS]
    rows, cols = _grid(max(1, len(shown)))
    fig = _figure(4.2 * cols + 0.5, 2.5 * rows + 1.2)
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)).ravel()
    handles: dict[str, Any] = {}
    for ax, name in zip(axes, shown):
        layers = panels[name]
        ordered = {k: layers[k] for k in keep if k in layers}
        rest = [v for k, v in layers.items() if k not in keep]
        if rest:
            ordered["others"] = np.sum(rest, axis=0)
        if ordered:
            polys = ax.stackplot(times, *ordered.values(), colors=[color[k] for k in ordered], step="mid", linewidth=0)
            handles.update(zip(ordered, polys))
        ax.set_title(name, fontsize="medium")
        ax.grid(alpha=0.3)
        ax.set_axisbelow(True)
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    for ax in axes[::cols]:
        ax.set_ylabel(ylabel)
    for ax in axes[(rows - 1) * cols:]:
        ax.set_xlabel(xlabel)
    more = f" (first {MAX_PANELS} of {len(names)})" if len(names) > MAX_PANELS else ""
    fig.suptitle(title + more)
    if handles:
        order = [k for k in keep + ["others"] if k in handles]
        fig.legend([handles[k] for k in order], order, loc="outside lower center", ncols=min(5, len(order)),
                   fontsize="small")
    fig.savefig(path, dpi=110)


def heatmap(path: Path, title: str, rows: list[str], times: np.ndarray, values: np.ndarray, label: str,
            xlabel: str = "seconds since the profile start") -> None:
    """Rows (e.g. OSTs) x time bins, e.g. how many clients each OST served at once."""
    fig = _figure(11, min(14, 1.8 + 0.32 * max(1, len(rows))))
    ax = fig.subplots()
    vmax = max(1, int(values.max())) if values.size else 1
    extent = (float(times[0]), float(times[-1]), len(rows) - 0.5, -0.5) if len(times) > 1 else None
    im = ax.imshow(values, aspect="auto", interpolation="nearest", cmap="magma_r", vmin=0, vmax=vmax, extent=extent)
    ax.set_yticks(range(len(rows)), rows, fontsize="small" if len(rows) < 30 else "xx-small")
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, label=label)
    fig.savefig(path, dpi=110)


def client_bars(path: Path, title: str, clients: list[str], series: dict[str, list[float]], ylabel: str) -> None:
    """Horizontal grouped bars per client (lock enqueues and cancels)."""
    n, k = len(clients), max(1, len(series))
    fig = _figure(9, min(16, 1.6 + 0.35 * max(1, n) * max(1, k / 2)))
    ax = fig.subplots()
    h = 0.8 / k
    for j, (name, vals) in enumerate(series.items()):
        ax.barh([i - 0.4 + h * (j + 0.5) for i in range(n)], vals, h, label=name, color=_PALETTE[j % len(_PALETTE)],
                edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(n), clients, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.35)
    ax.set_axisbelow(True)
    ax.legend(fontsize="small")
    fig.savefig(path, dpi=110)


def lines(path: Path, title: str, panels: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]], ylabel: dict[str, str],
          xlabel: str = "seconds since the profile start") -> None:
    """Stacked panels of line series sharing the time axis (iostat: %util, kB/s)."""
    fig = _figure(11, 2.6 * max(1, len(panels)) + 0.8)
    axes = np.atleast_1d(fig.subplots(len(panels), 1, sharex=True, squeeze=False)).ravel()
    for ax, (name, series) in zip(axes, panels.items()):
        for j, (label, (x, y)) in enumerate(series.items()):
            ax.plot(x, y, "o-", label=label, color=_PALETTE[j % len(_PALETTE)], linewidth=1.3, markersize=3)
        ax.set_ylabel(ylabel.get(name, name))
        ax.grid(alpha=0.3)
        if series:
            ax.legend(fontsize="small", ncols=min(4, len(series)))
    axes[-1].set_xlabel(xlabel)
    axes[0].set_title(title)
    fig.savefig(path, dpi=110)
