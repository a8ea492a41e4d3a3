"""The seasonal part of AIPA: each file's value from one run to the next.

A job's runs repeat, so the run is the season: a file (a *slot*: the same name template and
rank-tied fields, see `iez.predict.names`) plays the same role in every run. Per slot, the level
is carried from run to run by simple exponential smoothing,

    L_r = L_{r-1} + α (y_r − L_{r-1}),

which is the seasonal ARIMA(0,1,1) with Θ = α − 1. α = 1 is "same as the last run" (right when
values drift, as HACC's particles migrate between ranks); small α averages the runs (right when
runs jitter around fixed values, as IOR under a stonewall deadline). α is fitted by least squares
on the one-run-ahead errors of all slots. Those errors, laid out run after run in slot order, are
the innovations the ARIMA grid (`iez.predict.arima`) models.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALPHAS = np.linspace(0.05, 1.0, 20)


@dataclass(frozen=True)
class Seasonal:
    alpha: float
    level: np.ndarray  # per slot after the last run (NaN: the slot never appeared)
    innovations: np.ndarray  # one-run-ahead errors, run after run, in slot order, where defined


def smooth(y: np.ndarray, alpha: float) -> Seasonal:
    """Levels and innovations for one α. y: runs × slots, NaN where a slot is absent from a run."""
    level = y[0].copy()
    errors = []
    for row in y[1:]:
        have = ~np.isnan(row)
        known = have & ~np.isnan(level)
        e = row - level
        errors.append(e[known])
        level = np.where(known, level + alpha * e, np.where(have, row, level))
    return Seasonal(float(alpha), level, np.concatenate(errors) if errors else np.empty(0))


def fit(y: np.ndarray) -> Seasonal:
    """The α of ALPHAS with the least squared one-run-ahead error; ties go to the larger α."""
    fits = [smooth(y, a) for a in ALPHAS]
    return min(fits, key=lambda s: (float(np.sum(s.innovations**2)), -s.alpha))
