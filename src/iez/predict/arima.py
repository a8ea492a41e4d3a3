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
   ahead, so that is the error that matters). Fits are by conditional sum of squares (CSS, R's
   `arima(method = "CSS")`, Box and Jenkins' conditional least squares: docs/references.md#arima-css)
   on the d-times differenced series, not the paper's exact ML by Kalman filter: statsmodels'
   filter took 0.6 ms a likelihood and L-BFGS with finite differences about 500 of them per fit,
   7 s for the grid of a 10k-request trace, while the CSS residuals are a convolution and a
   banded triangular solve and their Jacobian one more solve, so Levenberg-Marquardt fits the grid in a quarter of a second. The AR and MA
   polynomials are kept stationary and invertible by fitting their partial autocorrelations
   (Monahan's transform, as statsmodels does for ML). A fit that does not converge within
   MAX_NFEV evaluations, fits exactly (a flat likelihood) or forecasts non-finite values is
   skipped, as the paper skips fits that fail to converge. Orders with too few points for their
   parameters are skipped.
4. The winner is refitted on the whole window (warm-started) and forecast `horizon` steps.

Fits run in `workers` processes when a grid is big enough to pay for the pool (by default one per
CPU this process may run on, and never more than there are fits), each with one BLAS thread: the
matrices are tiny, and idle BLAS threads of several processes spinning on 2 cores made fits 25x
slower. Results do not depend on timing or on `workers`: every fit's score is gathered before the
best is taken, by (RMSE, fewer terms, order).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Mapping

import numpy as np
# threadpoolctl ships no type hints.
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from iez.errors import IezError

MAX_NFEV = 200  # residual evaluations; a fit that needs more is skipped (the grid's median needs 20)
# Converged: the sum of squares moves < 1e-6 relative (ML's L-BFGS stopped at ~2e-6); tighter
# changes no forecast that matters.
FTOL = 1e-6
# Fewer fits than this run in this process: the default grid's 36 took 0.25 s of CPU, and a pool of
# two processes added 0.1 s of CPU and took no less time on 2 loaded cores.
POOL_MIN_FITS = 100
MIN_POINTS = 12  # below this a series is forecast by its mean: no tail to score orders on
KPSS_CRITICAL = 0.463  # the 5% point of level stationarity's statistic (docs/references.md#kpss-test)

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
    """Smallest d whose differenced series KPSS does not reject as level-stationary at 5%."""
    d = 0
    while d < max_d:
        w = np.diff(y, n=d)
        if len(w) < MIN_POINTS or np.ptp(w) == 0 or kpss_level(w) <= KPSS_CRITICAL:
            break
        d += 1
    return d


def kpss_level(y: np.ndarray) -> float:
    """The KPSS statistic of level stationarity (docs/references.md#kpss-test: eq. 11 over eq. 10's
    Bartlett long-run variance, its lags by Hobijn et al.'s rule, as statsmodels' `kpss(y, "c",
    nlags="auto")`). Written here because importing statsmodels for it took 1.2-1.8 s, more than
    the whole grid of fits."""
    n = len(y)
    e = y - y.mean()

    def gamma(i: int) -> float:  # the lag-i autocovariance
        return float(np.dot(e[i:], e[: n - i])) / n

    first = range(1, int(n ** (2 / 9)) + 1)  # Hobijn et al. pick the lags from these
    s0, s1 = gamma(0) + 2 * sum(gamma(i) for i in first), 2 * sum(i * gamma(i) for i in first)
    lags = min(int(1.1447 * np.cbrt((s1 / s0) ** 2) * n ** (1 / 3)), n - 1)
    long_run = gamma(0) + 2 * sum((1 - i / (lags + 1)) * gamma(i) for i in range(1, lags + 1))
    return float(np.sum(np.cumsum(e) ** 2) / n**2 / long_run)


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


def pacf_to_coefficients(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unconstrained reals -> the coefficients phi of a stationary 1 - phi_1 z - ... - phi_k z^k,
    and d phi / d x (docs/references.md#arima-css: each x maps to a partial autocorrelation in (-1, 1),
    and the Durbin-Levinson recursion builds the polynomial from them)."""
    k = len(x)
    s = 1 + x * x
    r, dr = x / np.sqrt(s), s**-1.5
    phi, jac = np.zeros(k), np.zeros((k, k))
    for j in range(k):
        if j:
            rev, jrev = phi[j - 1 :: -1].copy(), jac[j - 1 :: -1].copy()
            phi[:j] -= r[j] * rev
            jac[:j] -= r[j] * jrev
            jac[:j, j] -= rev * dr[j]
        phi[j], jac[j, j] = r[j], dr[j]
    return phi, jac


@dataclass(frozen=True)
class ArmaFit:
    """ARMA(p, q) around a mean, fitted to w by CSS: (w_t - mean) - sum ar_i (w_{t-i} - mean)
    = e_t + sum ma_j e_{t-j}, the first p points conditioned on and e before them 0."""

    w: np.ndarray
    p: int
    q: int
    trend: bool  # the mean is fitted (else 0: a differenced series)
    x: np.ndarray  # the unconstrained parameters: [mean], AR's, MA's (a warm start)

    @property
    def params(self) -> np.ndarray:
        """[mean], AR coefficients, MA coefficients."""
        mean, ar, ma, _, _ = _coefficients(self.x, self.p, self.trend)
        return np.concatenate(([mean] if self.trend else [], ar, ma))

    def forecast(self, steps: int) -> np.ndarray:
        """The next `steps` values: the ARMA recursion run on from the last p values and q
        residuals, with future innovations 0."""
        mean, ar, ma, _, _ = _coefficients(self.x, self.p, self.trend)
        u = self.w - mean
        e = _residuals(u, ar, ma)
        # (1 - ar(B)) f = what the known past adds to each early step
        known = np.zeros(steps)
        for coef, past in ((ar, u), (ma, e)):
            for i, c in enumerate(coef, start=1):
                h = min(i, steps)
                known[:h] += c * past[len(past) - i : len(past) - i + h]
        return mean + _lower_solve(-ar, known)


def _coefficients(x: np.ndarray, p: int, trend: bool):
    """mean, AR and MA coefficients of unconstrained parameters, and the two polynomials' Jacobians."""
    k = int(trend)
    ar, jar = pacf_to_coefficients(x[k : k + p])
    ma, jma = pacf_to_coefficients(x[k + p :])  # 1 + ma(z) = 1 - phi(z): invertible
    return (float(x[0]) if trend else 0.0), ar, -ma, jar, -jma


def _residuals(u: np.ndarray, ar: np.ndarray, ma: np.ndarray) -> np.ndarray:
    """e_t for t >= p of the mean-removed series u."""
    return _lower_solve(ma, np.convolve(u, np.concatenate(([1.0], -ar)), "valid"))  # u_t - sum ar_i u_{t-i}


def _lower_solve(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(1 + coef_1 B + ... + coef_k B^k)^-1 x along the first axis, from zero initial values: the
    all-pole filter, as the unit lower-triangular banded system LAPACK's dtbtrs solves (scipy.linalg
    loads in a fifth of the time scipy.signal's lfilter needs: scipy is imported at the first fit,
    as importing a trace reaches this package, for its accuracy figure, without fitting anything)."""
    from scipy.linalg.lapack import dtbtrs  # type: ignore[import-untyped]

    if not len(coef) or not len(x):
        return x
    band = np.empty((len(coef) + 1, len(x)))
    band[0], band[1:] = 1.0, coef[:, None]
    return dtbtrs(band, x.reshape(len(x), -1), uplo="L", diag="U")[0].reshape(x.shape)


def fit_arma(w: np.ndarray, p: int, q: int, trend: bool, start: np.ndarray | None = None) -> ArmaFit | None:
    """ARMA(p, q) (+ mean) on w by conditional sum of squares; None when the fit fails."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    k = int(trend)
    x0 = np.zeros(k + p + q) if start is None else np.array(start, dtype=float)
    if trend and start is None:
        x0[0] = w.mean()

    last: dict[str, np.ndarray] = {}

    def at(x: np.ndarray) -> dict[str, np.ndarray]:
        """Coefficients and residuals at x, kept for the Jacobian: MINPACK asks for the residuals
        and then the Jacobian at the same point (the polynomials' recursion was 40% of a fit)."""
        if "x" not in last or not np.array_equal(last["x"], x):
            mean, ar, ma, jar, jma = _coefficients(x, p, trend)
            u = w - mean
            last.update(x=x.copy(), u=u, ar=ar, ma=ma, jar=jar, jma=jma, e=_residuals(u, ar, ma))
        return last

    def residuals(x: np.ndarray) -> np.ndarray:
        return at(x)["e"]

    def jacobian(x: np.ndarray) -> np.ndarray:
        # e = (1 + ma(B))^-1 (1 - ar(B)) (w - mean): each column's derivative is one more filter
        # through 1 / (1 + ma(B)), all columns in one call.
        c = at(x)
        u, e, ar = c["u"], c["e"], c["ar"]
        n, m = len(u), len(e)
        lagged = np.zeros((m, k + p + q))
        if trend:
            lagged[:, 0] = 1.0 - ar.sum()
        for i in range(1, p + 1):
            lagged[:, k + i - 1] = u[p - i : n - i]
        for j in range(1, q + 1):
            lagged[j:, k + p + j - 1] = e[:-j]
        jac = _lower_solve(c["ma"], -lagged)
        jac[:, k : k + p] = jac[:, k : k + p] @ c["jar"]
        jac[:, k + p :] = jac[:, k + p :] @ c["jma"]
        return jac

    if len(x0):
        with np.errstate(all="ignore"):
            res = least_squares(residuals, x0, jac=jacobian, method="lm", ftol=FTOL, max_nfev=MAX_NFEV)
        if res.status <= 0 or not np.all(np.isfinite(res.x)):
            return None
        x = res.x
    else:
        x = x0
    sse = float(np.sum(residuals(x) ** 2))
    if not (np.isfinite(sse) and sse > 0):  # an exact fit: the likelihood has no maximum
        return None
    return ArmaFit(w, p, q, trend, x)


def _score(key: str, train: np.ndarray, test: np.ndarray, order: Order):
    """Holdout RMSE (standardized units) and fitted parameters of one order, or None."""
    p, d, q = order
    w, last = difference(train, d)
    fit = fit_arma(w, p, q, trend=d == 0)
    if fit is None:
        return key, order, None, None
    f = integrate(fit.forecast(len(test)), last)
    if not np.all(np.isfinite(f)):
        return key, order, None, None
    return key, order, float(np.sqrt(np.mean((f - test) ** 2))), fit.x


def _final(key: str, y: np.ndarray, order: Order, start: np.ndarray, horizon: int):
    """Refit the chosen order on the whole window and forecast; keep the holdout parameters if the
    refit fails (they fitted 1 - holdout of the same data)."""
    p, d, q = order
    w, last = difference(y, d)
    fit = fit_arma(w, p, q, trend=d == 0, start=start) or ArmaFit(w, p, q, d == 0, start)
    return key, integrate(fit.forecast(horizon), last)


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
    processes = min(workers, total) if total >= POOL_MIN_FITS else 1
    with threadpool_limits(1), _executor(processes) as pool, _Progress(progress, total) as bar:
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
