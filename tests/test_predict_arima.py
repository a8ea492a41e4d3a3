"""The ARIMA core of AIPA: differencing, d by KPSS, CSS fits against statsmodels' ML, the order grid,
skipped fits (iez.predict.arima)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iez.errors import IezError
from iez.predict import arima
from iez.predict.arima import (
    PredictionError,
    choose_d,
    difference,
    fit_arma,
    forecast_many,
    integrate,
    kpss_level,
    pacf_to_coefficients,
)


def ar1(n: int, phi: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.zeros(n)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + rng.standard_normal()
    return x


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-1000, 1000), min_size=8, max_size=40), st.integers(0, 3), st.integers(1, 5))
def test_integrate_inverts_difference(values, d, tail):
    """The differenced continuation of a series, integrated from the history's last levels,
    is the continuation itself."""
    y = np.array(values, dtype=float)
    head, rest = y[:-tail], y[-tail:]
    _, last = difference(head, d)
    continuation = np.diff(y, n=d)[-tail:]
    assert np.allclose(integrate(continuation, last), rest)


def test_choose_d_by_kpss():
    """KPSS at 5% rejects a stationary series about 1 time in 20, so judge over 20 series."""
    rng = np.random.default_rng(1)
    noise = [rng.standard_normal(400) for _ in range(20)]
    assert sum(choose_d(e, 5) == 0 for e in noise) >= 17
    assert sum(choose_d(np.cumsum(e), 5) == 1 for e in noise) >= 17
    assert sum(choose_d(np.cumsum(np.cumsum(e)), 5) == 2 for e in noise) >= 17
    assert choose_d(np.cumsum(noise[0]), 0) == 0  # never beyond max_order


def test_fit_recovers_an_ar1_coefficient():
    res = fit_arma(ar1(2000, 0.7), 1, 0, trend=True)
    mean, phi = res.params
    assert phi == pytest.approx(0.7, abs=0.05)
    assert mean == pytest.approx(0.0, abs=0.1)


def arma(n: int, ar: list[float], ma: list[float], mean: float, seed: int) -> np.ndarray:
    """A simulated ARMA series (200 burn-in steps dropped)."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal(n + 200)
    u = np.zeros(n + 200)
    for t in range(len(u)):
        u[t] = e[t] + sum(a * u[t - i - 1] for i, a in enumerate(ar) if t > i)
        u[t] += sum(b * e[t - j - 1] for j, b in enumerate(ma) if t > j)
    return mean + u[200:]


@pytest.mark.parametrize(
    "ar, ma, mean",
    [([0.5, -0.3], [], 3.0), ([], [0.6], 0.0), ([0.7], [0.4], -2.0), ([0.3], [-0.95], 0.0), ([0.6, -0.4], [0.5], 1.0)],
)
def test_css_fit_agrees_with_statsmodels_exact_ml(ar, ma, mean):
    """CSS (conditional on the first p points) and exact ML by Kalman filter estimate the same
    model: on 1,000 points their coefficients and forecasts agree to well within the sampling error,
    an MA root near the unit circle included."""
    from statsmodels.tsa.arima.model import ARIMA

    y = arma(1000, ar, ma, mean, seed=len(ar) * 10 + len(ma))
    p, q = len(ar), len(ma)
    ours = fit_arma(y, p, q, trend=True)
    ml = ARIMA(y, order=(p, 0, q), trend="c").fit()
    assert ours.params == pytest.approx(ml.params[:-1], abs=0.03)  # ML's last is the variance
    assert ours.params[1:] == pytest.approx(ar + ma, abs=0.1)  # and both near the truth
    assert ours.forecast(20) == pytest.approx(ml.forecast(20), abs=0.05)
    if not q:  # an AR's first step is the mean plus the AR terms of the last values
        mu, phis = ours.params[0], ours.params[1:]
        assert ours.forecast(1)[0] == pytest.approx(mu + sum(a * (y[-i - 1] - mu) for i, a in enumerate(phis)))


def test_kpss_statistic_is_statsmodels():
    """choose_d's KPSS statistic is statsmodels' kpss(y, "c", nlags="auto") on noise, random walks,
    their sums and trends, short and long."""
    from statsmodels.tsa.stattools import kpss

    rng = np.random.default_rng(5)
    for i in range(60):
        e = rng.standard_normal(int(rng.integers(12, 600)))
        y = [e, np.cumsum(e), np.cumsum(np.cumsum(e)), e + 0.05 * np.arange(len(e))][i % 4]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # p-values outside statsmodels' table
            assert kpss_level(y) == pytest.approx(kpss(y, regression="c", nlags="auto")[0], rel=1e-9)


def test_pacf_transform_is_stationary_and_its_jacobian_exact():
    rng = np.random.default_rng(6)
    for _ in range(200):
        x = 3 * rng.standard_normal(int(rng.integers(1, 8)))
        phi, jac = pacf_to_coefficients(x)
        roots = np.roots(np.r_[1.0, -phi][::-1])
        assert np.all(np.abs(roots) > 1)  # 1 - phi(z) has no root in the unit disc
        h = 1e-6
        numeric = np.column_stack([(pacf_to_coefficients(x + h * u)[0] - phi) / h for u in np.eye(len(x))])
        assert jac == pytest.approx(numeric, abs=1e-4)


def test_failed_fits_return_none():
    # an all-zero series has no likelihood to maximise: statsmodels raises, the fit is skipped
    assert fit_arma(np.zeros(60), 2, 2, trend=False) is None
    assert fit_arma(np.zeros(60), 1, 0, trend=True) is None


def test_constant_series_needs_no_grid():
    f = forecast_many({"bytes": np.full(500, 1048576.0)}, 7, workers=1)["bytes"]
    assert (f.method, f.order, f.grid, f.rmse) == ("constant", (0, 0, 0), 0, 0.0)
    assert np.array_equal(f.values, np.full(7, 1048576.0))


def test_near_constant_series_within_atol_needs_no_grid():
    y = 5e8 + np.random.default_rng(0).uniform(-100, 100, 300)
    f = forecast_many({"b": y}, 3, workers=1, atol={"b": 500.0})["b"]
    assert f.method == "constant" and f.grid == 0
    assert f.values == pytest.approx(np.full(3, y.mean()))
    assert forecast_many({"b": y}, 3, max_order=1, workers=1)["b"].method == "arima"


def test_short_series_is_forecast_by_its_mean():
    f = forecast_many({"s": np.array([1.0, 3.0, 2.0])}, 2, workers=1)["s"]
    assert f.method == "mean" and np.isnan(f.rmse)
    assert np.array_equal(f.values, [2.0, 2.0])


def test_grid_forecasts_an_ar1_towards_its_mean():
    x = ar1(400, 0.8, seed=2)
    f = forecast_many({"x": x}, 200, max_order=2, workers=1)["x"]
    assert f.method == "arima" and f.grid == 9 and f.order[1] == 0
    assert f.rmse > 0 and np.isfinite(f.values).all()
    assert abs(f.values[-1] - x.mean()) < 0.5  # far ahead: the mean
    assert abs(f.values[0] - x[-1]) < abs(x[-1] - x.mean()) + 1.0  # near: from the last value


def test_random_walk_with_drift_is_differenced():
    rng = np.random.default_rng(4)
    y = np.cumsum(5.0 + 0.1 * rng.standard_normal(300))
    f = forecast_many({"y": y}, 10, max_order=1, workers=1)["y"]
    assert f.order[1] >= 1
    assert f.values[-1] > y[-1]  # keeps climbing


def test_results_do_not_depend_on_workers(monkeypatch):
    series = {"a": ar1(200, 0.5, seed=5), "b": np.cumsum(ar1(200, 0.3, seed=6)), "c": np.ones(50)}
    one = forecast_many(series, 20, max_order=2, workers=1)
    monkeypatch.setattr(arima, "POOL_MIN_FITS", 1)  # a grid this small would otherwise run in-process
    two = forecast_many(series, 20, max_order=2, workers=2)
    for k in series:
        assert one[k].order == two[k].order and one[k].skipped == two[k].skipped
        assert np.allclose(one[k].values, two[k].values)


def test_warnings_as_errors_do_not_break_the_search():
    """pytest -W error (or a caller's filter) must not turn statsmodels' fit warnings into crashes."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = forecast_many({"x": ar1(150, 0.95, seed=7)}, 5, max_order=3, workers=1)["x"]
    assert f.method == "arima" and f.grid == 16


def test_window_bounds_the_fit():
    y = np.r_[np.full(1000, 50.0), ar1(100, 0.5, seed=8)]
    assert forecast_many({"y": y}, 1, workers=1, window=100, max_order=0)["y"].values[0] == pytest.approx(0, abs=1)


@pytest.mark.parametrize(
    "opts",
    [dict(max_order=-1), dict(max_order=11), dict(holdout=0), dict(holdout=0.9), dict(workers=0), dict(window=3)],
)
def test_bad_options_are_one_line_errors(opts):
    with pytest.raises(PredictionError) as e:
        forecast_many({"x": np.ones(20)}, 1, **opts)
    assert isinstance(e.value, IezError) and "\n" not in str(e.value)


def test_non_finite_values_are_an_error():
    with pytest.raises(PredictionError, match="non-finite"):
        forecast_many({"x": np.array([1.0, np.nan, 2.0])}, 1)


def test_periodic_series_is_repeated_without_a_grid():
    """A series that repeats a period (labels cycling over ranks, alternating sizes) is forecast
    by repeating its last period, in phase, and needs no fit."""
    cycle = np.array([4.0, 8.0, 8.0, 1.0, 2.0])
    y = np.tile(cycle, 30)[:-2]  # ends two steps into a period: the forecast continues from there
    f = forecast_many({"c": y}, 7, workers=1)["c"]
    assert (f.method, f.period, f.grid, f.rmse) == ("periodic", 5, 0, 0.0)
    assert list(f.values) == [1.0, 2.0, 4.0, 8.0, 8.0, 1.0, 2.0]
    # Within atol it is still periodic; beyond it, or drifting from period to period, it is not.
    noisy = y + 0.01 * np.random.default_rng(3).standard_normal(len(y))
    assert forecast_many({"c": noisy}, 3, workers=1, atol={"c": 0.1})["c"].method == "periodic"
    drift = y + 0.001 * np.arange(len(y))
    assert forecast_many({"c": drift}, 3, max_order=1, workers=1, atol={"c": 0.1})["c"].method == "arima"


def test_identical_series_are_searched_once():
    x = ar1(120, 0.6, seed=9)
    got = forecast_many({"a": x, "b": x.copy(), "c": x + 1.0}, 4, max_order=1, workers=1)
    assert got["a"] is got["b"] and got["c"] is not got["a"]
    assert got["a"].method == got["c"].method == "arima" and got["a"].order == got["c"].order
