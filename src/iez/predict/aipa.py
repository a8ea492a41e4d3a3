"""AIPA, seed 000's ARIMA-inspired prediction algorithm (docs/references.md#s000-aipa): the next run's
requests.

Seed 000 models three properties of a job's requests as time series (write bytes, stripe count,
MPI rank), grid-searches ARIMA(p, d, q) over [0..5]³ by RMSE, fits by exact ML with a Kalman
filter and forecasts. Here the whole pipeline, from past runs to the next run's requests:

1. Names (`names`): infer the name templates, give every file a key (its role across runs) and
   its next-run name. The next run creates the files of the last run, under their next names.
2. Season (`seasonal`): a run is a season. Per file, a level carried from run to run; write
   bytes are smoothed with a fitted α, while stripe count and rank, which are labels rather
   than quantities, carry the last run's value (α = 1).
3. ARIMA (`arima`): the one-run-ahead innovations, laid out run after run in file order, are
   the time series. Constant series (IOR's equal file sizes; stripe counts; ranks carried in
   names) are detected and need no grid; others get the (p, d, q) grid and the forecast.
4. Next run: level + forecast, rounded; stripe count and rank stay within the values seen, and a
   rank that the file name carries is taken from the name. The rest is carried per file: the
   communicator, API and pool of the last run, and the writers' facts (writers, transfer size,
   write alignment, extents per writer) last known, so a run traced without them (0) does not
   erase what an earlier one saw. Like stripe counts these are labels of how the job writes, not quantities to
   extrapolate, and they do not drift from run to run. A file whose bytes rose over the runs is
   marked as growing (`Request.grows`), so that its layout widens past the predicted bytes.

With one past run there is nothing to learn across runs: the next run repeats it, same names
and values (method "repeat"); the second traced run shows what advances.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from iez.predict import names, seasonal
from iez.predict.arima import Order, PredictionError, check_options, forecast_many, workers_default
from iez.request import Request

SERIES = ("write_bytes", "stripe_count", "rank")
BYTES_RTOL = 1e-6  # innovations spread below a millionth of the file sizes: a constant


@dataclass(frozen=True)
class Prediction:
    requests: list[Request]  # the next run's, in predicted create order, file names included
    orders: dict[str, Order]  # chosen (p, d, q) per series; (0, 0, 0) when no grid was needed
    rmse: dict[str, float]  # holdout RMSE per series in its units (NaN: no holdout to score)
    method: dict[str, str]  # arima | constant | periodic | mean (too short for a grid) | repeat (one run)
    alpha: dict[str, float] = field(default_factory=dict)  # run-to-run smoothing per series
    templates: list[str] = field(default_factory=list)  # inferred name templates, printf form
    runs: int = 0  # past runs the prediction learnt from
    grid: dict[str, int] = field(default_factory=dict)  # ARIMA orders in each series' grid
    skipped: dict[str, int] = field(default_factory=dict)  # orders skipped (no convergence, ...)


def predict_next_run(
    runs: Sequence[Sequence[Request]],
    *,
    max_order: int = 5,
    workers: int | None = None,
    holdout: float = 0.2,
    progress: bool = False,
    window: int = 512,
    exhaustive: bool = False,
) -> Prediction:
    """Predict the requests of a job's next run from its past runs (oldest first, each in create
    order). `window` bounds the ARIMA fits to the most recent innovations; `exhaustive` grids
    every d instead of choosing d by the KPSS rule."""
    check_options(max_order=max_order, holdout=holdout, workers=workers_default() if workers is None else workers,
                  window=window)
    if not runs:
        raise PredictionError("no traced runs to predict from")
    runs = [_validated(r, run) for r, run in enumerate(runs)]
    model = names.infer([[(q.path, q.rank, q.run, q.host, bool(q.final_path), q.name_random) for q in run]
                         for run in runs])
    keyed = [{model.key(r, q.path): q for q in run} for r, run in enumerate(runs)]
    slots = _slot_order(keyed[-1])

    def matrix(attr: str) -> np.ndarray:
        return np.array(
            [[float(getattr(k[s], attr)) if s in k else np.nan for s in slots] for k in keyed], dtype=float
        ).reshape(len(keyed), len(slots))

    values = {name: matrix(name) for name in SERIES}
    season = {
        "write_bytes": seasonal.fit(values["write_bytes"]),
        "stripe_count": seasonal.smooth(values["stripe_count"], 1.0),
        "rank": seasonal.smooth(values["rank"], 1.0),
    }
    learn = {name: s.innovations for name, s in season.items() if len(s.innovations)}
    size = np.nanmean(np.abs(values["write_bytes"])) if len(slots) else 0.0
    fc = forecast_many(
        learn,
        len(slots),
        max_order=max_order,
        holdout=holdout,
        workers=workers,
        window=window,
        exhaustive=exhaustive,
        atol={"write_bytes": BYTES_RTOL * size},
        progress=progress,
    )
    predicted = {}
    for name in SERIES:
        step = fc[name].values if name in fc else np.zeros(len(slots))
        predicted[name] = np.rint(season[name].level + step)
    predicted["write_bytes"] = np.maximum(predicted["write_bytes"], 0)
    for name in ("stripe_count", "rank"):
        if len(slots):  # labels: never one that was not seen
            predicted[name] = np.clip(predicted[name], np.nanmin(values[name]), np.nanmax(values[name]))
    create = np.nanmean(matrix("create_time"), axis=0) if len(slots) else np.empty(0)

    label = names.next_label([run[0].run for run in runs if run])
    last = keyed[-1]
    requests = []
    for i, key in enumerate(slots):
        named = model.rank_of(key)
        rank = int(predicted["rank"][i]) if named is None else named
        requests.append(
            Request(
                path=model.next_path(key),
                write_bytes=int(predicted["write_bytes"][i]),
                stripe_count=int(predicted["stripe_count"][i]),
                rank=rank,
                app=last[key].app,
                run=label,
                create_time=float(create[i]),
                comm_size=last[key].comm_size,
                api=last[key].api,
                pool=last[key].pool,
                writers=_last_known(keyed, key, "writers"),
                transfer_size=_last_known(keyed, key, "transfer_size"),
                write_align=_last_known(keyed, key, "write_align"),
                writer_segments=_last_known(keyed, key, "writer_segments"),
                grows=_grows(values["write_bytes"][:, i]),
                # the creator's node, while the same rank creates it (bpio binds the file to it)
                host=last[key].host if rank == last[key].rank else "",
            )
        )
    requests.sort(key=lambda q: q.create_time)
    return Prediction(
        requests=requests,
        orders={n: fc[n].order if n in fc else (0, 0, 0) for n in SERIES},
        rmse={n: fc[n].rmse if n in fc else float("nan") for n in SERIES},
        method={n: fc[n].method if n in fc else "repeat" for n in SERIES},
        alpha={n: season[n].alpha for n in SERIES},
        templates=[str(t) for t in model.templates],
        runs=len(runs),
        grid={n: fc[n].grid for n in fc},
        skipped={n: fc[n].skipped for n in fc},
    )


def _validated(r: int, run: Sequence[Request]) -> list[Request]:
    """The run's requests, one per path (a path created twice in a run keeps the last creation,
    which is the file the run leaves behind)."""
    by_path: dict[str, Request] = {}
    for q in run:
        if not isinstance(q, Request):
            raise PredictionError(f"run {r}: expected Request records, got {type(q).__name__}")
        if q.write_bytes < 0:
            raise PredictionError(f"run {r}: {q.path}: negative write_bytes {q.write_bytes}")
        by_path[q.path] = q
    return list(by_path.values())


def _last_known(keyed: Sequence[dict[names.Key, Request]], key: names.Key, attr: str) -> int:
    """The newest run's non-zero `attr` of the file `key` (0: no run knew it)."""
    return next((v for k in reversed(keyed) if key in k and (v := getattr(k[key], attr)) > 0), 0)


def _grows(history: np.ndarray) -> bool:
    """A file's bytes rose over the traced runs that had it: never fell, and the newest is more
    than the oldest (the automatic layout widens past them: docs/layouts.md)."""
    seen = history[~np.isnan(history)]
    return len(seen) >= 2 and bool(np.all(np.diff(seen) >= 0) and seen[-1] > seen[0])


def _slot_order(last: dict[names.Key, Request]) -> list[names.Key]:
    """The last run's files: templates in order of first creation, then by field values
    (rank order for rank-tied fields), so neighbouring ranks are neighbours in the series."""
    first: dict[tuple[str, ...], int] = {}
    for literals, _ in last:
        first.setdefault(literals, len(first))
    return sorted(last, key=lambda k: (first[k[0]], k[1]))
