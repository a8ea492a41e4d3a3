"""ARIMA order search and forecasts: the statistical core of AIPA (docs/references.md#s000-aipa).

For each numeric series, on its most recent `window` points:

1. A constant or near-constant series (spread ≤ `atol`) is forecast as its mean: no grid, since
   fitting ARIMA to a constant fails or wastes time. A periodic one (every value equal, within
   `atol`, to the one P steps before, for a P of at most half the window) is forecast exactly by
   repeating its last period: the seasonal random walk, with nothing left to fit. Identical series
   (same window, same `atol`) are searched once.
2. d is chosen by the KPSS rule (difference while KPSS rejects stationarity at 5%, as
   auto.arima's ndiffs does); `exhaustive=True` tries every d instead.
3. Every (p, q) in [0..max_order]² is fitted on the window minus a held-out tail and scored by
   the RMSE of its multi-step forecast over that tail (the predictor forecasts a whole run
   ahead, so that is the error that matters). Fits are exact maximum likelihood by Kalman filter
   (statsmodels SARIMAX on the d-times differenced series). A fit that does not converge within
   MAXITER iterations, warns so, raises or forecasts non-finite values is skipped, as the paper
   skips fits that fail to converge. Orders with too few points for their parameters are skipped.
4. The winner is refitted on the whole window (warm-started) and forecast `horizon` steps.

Fits run in `workers` processes (fork: the children inherit the imported statsmodels; by default
one per CPU this process may run on, and never more than there are fits), each with one BLAS
thread: the matrices are tiny, and idle BLAS threads of several processes spinning on 2 cores made
fits 25x slower. Results do not depend on timing or on `workers`: every fit's score is gathered
before the best is taken, by (RMSE, fewer terms, order).
"""

from __future__ import annotations

import multiprocessing
import os
import warnings
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Mapping

import numpy as np
# statsmodels and threadpoolctl ship no type hints.
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from iez.errors import IezError

MAXITER = 50  # L-BFGS iterations; a fit that needs more (flat likelihood, near-unit roots) is skipped
# Converged: the mean log-likelihood moves < 1e10 * machine eps (~2e-6) relative, or its projected
# gradient < 1e-3. Tighter tolerances cost 2.5x the time and change no forecast that matters.
FACTR, PGTOL = 1e10, 1e-3
MIN_POINTS = 12  # below this a series is forecast by its mean: no tail to score orders on
KPSS_ALPHA = 0.05

Order = tuple[int, int, int]


class PredictionError(IezError):
    """Input AIPA cannot predict from (no runs, bad options)."""


@dataclass(frozen=True)
class Forecast:
    order: Order  # chosen (p, d, q); (0, 0, 0) when no model was fitted
    rmse: float  # of the chosen order's forecast over the held-out tail, in series units
    method: str  # arima | constant | periodic | mean (too short to score orders)
    values: np.ndarray  # the forecast, `horizon` values
    grid: int = 0  # orders in the grid
    skipped: int = 0  # of which skipped: no convergence, error, too slow, non-finite, too few points
    period: int = 0  # steps of a periodic series' period (0: not periodic)


def difference(y: np.ndarray, d: int) -> tuple[np.ndarray, list[float]]:
    """y differenced d times, and the last value at each level (to integrate forecasts back)."""
    last = []
    for _ in range(d):
        last.append(float(y[-1]))
        y = np.diff(y)
    return y, last


def integrate(f: np.ndarray, last: list[float]) -> np.ndarray:
    for level in reversed(last):
        f = level + np.cumsum(f)
    return f


def choose_d(y: np.ndarray, max_d: int) -> int:
    """Smallest d whose differenced series KPSS does not reject as level-stationary."""
    # statsmodels is imported where it is used: it takes about a second to load, and importing a
    # trace reaches this package (for its accuracy figure) without fitting anything.
    from statsmodels.tsa.stattools import kpss  # type: ignore[import-untyped]

    d = 0
    while d < max_d:
        w = np.diff(y, n=d)
        if len(w) < MIN_POINTS or np.ptp(w) == 0:
            break
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # p-values outside the table are clipped: fine here
            pvalue = kpss(w, regression="c", nlags="auto")[1]
        if pvalue >= KPSS_ALPHA:
            break
        d += 1
    return d


def period(y: np.ndarray, atol: float) -> int:
    """The shortest P in 2..len(y)//2 such that y is its first P values repeated, each within atol
    (at least two whole periods seen, and no drift from one to the next); 0 if none."""
    steps = np.arange(len(y))
    for p in range(2, len(y) // 2 + 1):
        if np.all(np.abs(y - y[steps % p]) <= atol):
            return p
    return 0


def workers_default() -> int:
    """The CPUs this process may run on (its affinity mask, which a batch scheduler sets)."""
    return len(os.sched_getaffinity(0))


def feasible(n: int, p: int, d: int, q: int) -> bool:
    """Enough differenced points to estimate p + q + 1 parameters (a few per parameter)."""
    return n - d >= 2 * (p + q + 1) + 8


def fit_arma(w: np.ndarray, p: int, q: int, trend: bool, start: np.ndarray | None = None):
    """Exact-ML ARMA(p, q) (+ constant) on w by Kalman filter; None when the fit fails."""
    from statsmodels.tools.sm_exceptions import ConvergenceWarning  # type: ignore[import-untyped]
    from statsmodels.tsa.statespace.sarimax import SARIMAX  # type: ignore[import-untyped]

    model = SARIMAX(w, order=(p, 0, q), trend="c" if trend else "n", concentrate_scale=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # record, so an outer "error" filter cannot raise mid-fit
        try:
            if model.k_params == 0:
                res = model.filter(np.empty(0))
            else:
                res = model.fit(
                    start_params=start, disp=False, maxiter=MAXITER, factr=FACTR, pgtol=PGTOL, cov_type="none"
                )
        except Exception:  # statsmodels fails in many ways (LinAlgError, ValueError, ...): all mean "skip"
            return None
    if any(issubclass(c.category, ConvergenceWarning) for c in caught):
        return None
    if model.k_params and not res.mle_retvals.get("converged", False):
        return None
    if not (np.all(np.isfinite(res.params)) and np.isfinite(res.llf)):
        return None
    return res


def _score(key: str, train: np.ndarray, test: np.ndarray, order: Order):
    """Holdout RMSE (standardized units) and fitted params of one order, or None."""
    p, d, q = order
    w, last = difference(train, d)
    res = fit_arma(w, p, q, trend=d == 0)
    if res is None:
        return key, order, None, None
    f = integrate(res.forecast(len(test)), last)
    if not np.all(np.isfinite(f)):
        return key, order, None, None
    return key, order, float(np.sqrt(np.mean((f - test) ** 2))), res.params


def _final(key: str, y: np.ndarray, order: Order, start: np.ndarray, horizon: int):
    """Refit the chosen order on the whole window and forecast; keep the holdout params if the
    refit fails (they fitted 1 - holdout of the same data)."""
    p, d, q = order
    w, last = difference(y, d)
    res = fit_arma(w, p, q, trend=d == 0, start=start)
    if res is None:
        from statsmodels.tsa.statespace.sarimax import SARIMAX

        res = SARIMAX(w, order=(p, 0, q), trend="c" if d == 0 else "n", concentrate_scale=True).filter(start)
    return key, integrate(res.forecast(horizon), last)


def _executor(workers: int) -> Executor:
    if workers <= 1:
        return ThreadPoolExecutor(1)  # in-process, same interface
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


@dataclass
class _Plan:
    """One series being searched: its standardized window and what the grid found so far."""

    y: np.ndarray
    mean: float
    std: float
    holdout: int
    orders: list[Order]
    grid: int
    skipped: int  # so far; starts with the orders that have too few points
    best: tuple[float, Order, np.ndarray] | None = None


def forecast_many(
    series: Mapping[str, np.ndarray],
    horizon: int,
    *,
    max_order: int = 5,
    holdout: float = 0.2,
    workers: int | None = None,
    window: int = 512,
    exhaustive: bool = False,
    atol: Mapping[str, float] | None = None,
    progress: bool = False,
) -> dict[str, Forecast]:
    """Forecast `horizon` steps of each series (the order search of all series shares one pool;
    None workers: one per CPU)."""
    workers = workers_default() if workers is None else workers
    check_options(max_order=max_order, holdout=holdout, workers=workers, window=window)
    atol = atol or {}
    out: dict[str, Forecast] = {}
    plans: dict[str, _Plan] = {}
    first: dict[tuple[bytes, float], str] = {}  # a window and its atol -> the first series that had it
    same: dict[str, str] = {}  # a series -> the identical one searched for it
    for key, values in series.items():
        y = np.asarray(values, dtype=float)[-window:]
        if not np.all(np.isfinite(y)):
            raise PredictionError(f"series {key}: holds non-finite values")
        tol = atol.get(key, 0.0)
        twin = first.setdefault((y.tobytes(), tol), key)
        if twin != key:
            same[key] = twin
            continue
        n_test = max(1, round(holdout * len(y)))
        if len(y) and np.ptp(y) <= tol:
            tail = y[-n_test:]
            rmse = float(np.sqrt(np.mean((tail - y.mean()) ** 2)))
            out[key] = Forecast((0, 0, 0), rmse, "constant", np.full(horizon, y.mean()))
            continue
        if len(y) < MIN_POINTS:
            mean = float(y.mean()) if len(y) else 0.0
            out[key] = Forecast((0, 0, 0), float("nan"), "mean", np.full(horizon, mean))
            continue
        if (p := period(y, tol)) > 0:
            # The training part's last period repeated over the held-out tail, which it reproduces
            # within atol (the tail starts at 0.8 of the window, past the first period).
            start = len(y) - n_test
            tail, repeated = y[start:], y[start - p + np.arange(n_test) % p]
            rmse = float(np.sqrt(np.mean((tail - repeated) ** 2)))
            out[key] = Forecast((0, 0, 0), rmse, "periodic", y[len(y) - p + np.arange(horizon) % p], period=p)
            continue
        mean, std = float(y.mean()), float(y.std())
        z = (y - mean) / std  # unit scale keeps the optimizer well conditioned for byte counts
        n_train = len(z) - n_test
        ds = range(max_order + 1) if exhaustive else [choose_d(z[:n_train], max_order)]
        orders = [(p, d, q) for d in ds for p in range(max_order + 1) for q in range(max_order + 1)]
        # biggest first, so the pool ends evenly loaded
        ok = sorted((o for o in orders if feasible(n_train, *o)), key=lambda o: -(o[0] + o[2]))
        plans[key] = _Plan(z, mean, std, n_test, ok, grid=len(orders), skipped=len(orders) - len(ok))
    if plans:
        _search(plans, horizon, workers, progress)
        for key, pl in plans.items():
            if pl.best is None:  # every order failed: the mean is ARIMA(0,0,0) by least squares
                out[key] = Forecast((0, 0, 0), float("nan"), "mean", np.full(horizon, pl.mean), pl.grid, pl.skipped)
                continue
            rmse, order, values = pl.best
            out[key] = Forecast(order, rmse * pl.std, "arima", values * pl.std + pl.mean, pl.grid, pl.skipped)
    out.update({key: out[twin] for key, twin in same.items()})
    return {key: out[key] for key in series}


def _search(plans: dict[str, _Plan], horizon: int, workers: int, progress: bool) -> None:
    total = sum(len(pl.orders) for pl in plans.values())
    with threadpool_limits(1), _executor(min(workers, total)) as pool, _Progress(progress, total) as bar:
        futures: list[Future] = []
        for key, pl in plans.items():
            train, test = pl.y[: -pl.holdout], pl.y[-pl.holdout :]
            futures += [pool.submit(_score, key, train, test, o) for o in pl.orders]
        for fut in as_completed(futures):
            key, order, rmse, params = fut.result()
            pl = plans[key]
            bar.advance()
            if rmse is None:
                pl.skipped += 1
            elif pl.best is None or (rmse, sum(order), order) < (pl.best[0], sum(pl.best[1]), pl.best[1]):
                pl.best = (rmse, order, params)
        finals = [
            pool.submit(_final, key, pl.y, pl.best[1], pl.best[2], horizon)
            for key, pl in plans.items()
            if pl.best is not None
        ]
        for fut in as_completed(finals):
            key, values = fut.result()
            pl = plans[key]
            assert pl.best is not None  # only plans with a best order were submitted
            pl.best = (pl.best[0], pl.best[1], values)


class _Progress:
    """A rich progress bar over ARIMA fits, or nothing."""

    def __init__(self, show: bool, total: int):
        self.bar = None
        if show:
            from rich.progress import Progress

            self.bar = Progress(transient=True)
            self.task = self.bar.add_task("AIPA: fitting ARIMA orders", total=total)

    def __enter__(self):
        if self.bar:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar:
            self.bar.stop()

    def advance(self) -> None:
        if self.bar:
            self.bar.advance(self.task)


def check_options(*, max_order: int, holdout: float, workers: int, window: int) -> None:
    if not 0 <= max_order <= 10:
        raise PredictionError(f"max_order must be 0..10, got {max_order}")
    if not 0 < holdout <= 0.5:
        raise PredictionError(f"holdout must be a fraction in (0, 0.5], got {holdout}")
    if workers < 1:
        raise PredictionError(f"workers must be at least 1, got {workers}")
    if window < MIN_POINTS:
        raise PredictionError(f"window must be at least {MIN_POINTS} points, got {window}")
