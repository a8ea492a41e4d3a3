"""AIPA end to end: past runs in, the next run's requests out (iez.predict)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iez.errors import IezError
from iez.predict import Prediction, PredictionError, accuracy, needs_retrace, predict_next_run
from iez.predict import workloads
from iez.request import Request


def names(reqs):
    return {q.path for q in reqs}


def test_ior_fpp_is_predicted_exactly():
    runs = workloads.ior(runs=4, nprocs=16, stripe_count=8)
    pred = predict_next_run(runs[:-1], max_order=1)
    assert isinstance(pred, Prediction)
    assert accuracy(pred.requests, runs[-1]) == 1.0
    assert pred.method == {"write_bytes": "constant", "stripe_count": "constant", "rank": "constant"}
    assert pred.orders == {"write_bytes": (0, 0, 0), "stripe_count": (0, 0, 0), "rank": (0, 0, 0)}
    assert pred.templates == ["/lustre/scratch/ior/testFile.%08d"]
    assert pred.runs == 3
    q = pred.requests[0]
    assert (q.app, q.run, q.stripe_count, q.write_bytes) == ("ior", "4", 8, 1 << 30)


def test_ior_ssf_keeps_the_shared_file():
    runs = workloads.ior(runs=3, nprocs=32, fpp=False)
    pred = predict_next_run(runs[:-1], max_order=1)
    [q] = pred.requests
    assert (q.path, q.comm_size, q.api, q.write_bytes) == ("/lustre/scratch/ior/testFile", 32, "mpiio", 32 << 30)


def test_hacc_io_beats_the_papers_accuracy():
    runs = workloads.hacc_io(runs=6, nprocs=32)
    pred = predict_next_run(runs[:-1], max_order=2)
    assert names(pred.requests) == names(runs[-1])
    assert accuracy(pred.requests, runs[-1]) >= 0.983  # the paper's 98.3% on HACC-I/O (docs/references.md#s000-aipa)
    assert pred.method["write_bytes"] == "arima"
    assert pred.grid["write_bytes"] == 9
    p, d, q = pred.orders["write_bytes"]
    assert 0 <= p <= 2 and 0 <= d <= 2 and 0 <= q <= 2
    assert pred.rmse["write_bytes"] > 0
    # the prediction is near the last run, not a copy of it and not a flat mean
    last = {q.rank: q.write_bytes for q in runs[-2]}
    got = {q.rank: q.write_bytes for q in pred.requests}
    assert max(abs(got[k] - last[k]) / last[k] for k in last) < 0.02
    assert len(set(got.values())) > 16


def test_full_zero_to_five_grid_on_a_small_trace():
    runs = workloads.hacc_io(runs=4, nprocs=24, seed=3)
    pred = predict_next_run(runs[:-1], max_order=5, exhaustive=True)
    assert pred.grid["write_bytes"] == 216
    assert 0 < pred.skipped["write_bytes"] < 216  # big orders on ~40 points: skipped, not crashed
    assert all(0 <= v <= 5 for v in pred.orders["write_bytes"])
    assert accuracy(pred.requests, runs[-1]) >= 0.983


def test_checkpoint_names_and_growth_are_extrapolated():
    runs = workloads.checkpoint(runs=5, nprocs=4, per_run=3, growth=0.01)
    pred = predict_next_run(runs[:-1], max_order=1)
    assert names(pred.requests) == names(runs[-1])
    assert accuracy(pred.requests, runs[-1]) > 0.999  # a steady growth: the ARIMA drift
    # the repeat of the last run would be ~3% short
    last = predict_next_run(runs[-2:-1], max_order=1)
    assert accuracy(last.requests, runs[-1]) == 0.0  # one run: names repeat, so all miss


def test_single_run_repeats_it():
    [run] = workloads.hacc_io(runs=1, nprocs=8)
    pred = predict_next_run([run])
    assert pred.method == {"write_bytes": "repeat", "stripe_count": "repeat", "rank": "repeat"}
    assert all(math.isnan(v) for v in pred.rmse.values())
    assert sorted((q.path, q.write_bytes, q.rank) for q in pred.requests) == sorted(
        (q.path, q.write_bytes, q.rank) for q in run
    )


def test_stonewalled_ior_is_close_to_each_ranks_mean():
    runs = workloads.ior(runs=8, nprocs=64, deadline=0.02, seed=4)
    pred = predict_next_run(runs[:-1], max_order=1)
    assert pred.alpha["write_bytes"] < 1.0  # runs jitter around a per-rank level: average them
    assert accuracy(pred.requests, runs[-1]) > 0.97


def test_stripe_count_follows_the_last_run():
    runs = workloads.ior(runs=3, nprocs=8, stripe_count=4) + workloads.ior(runs=1, nprocs=8, stripe_count=8)
    pred = predict_next_run(runs, max_order=1)
    assert {q.stripe_count for q in pred.requests} == {8}


def test_writers_facts_are_carried_last_known_per_file():
    """The writers' facts are the last run's where it knew them; a run traced without them (0)
    keeps what the run before saw, file by file."""
    from dataclasses import replace

    runs = workloads.ior(runs=3, nprocs=4, fpp=False)
    facts = [(32, 1 << 20, 1 << 20), (64, 4 << 20, 1 << 16), (0, 0, 0)]
    runs = [[replace(q, writers=w, transfer_size=t, write_align=a) for q in run] for run, (w, t, a) in zip(runs, facts)]
    [q] = predict_next_run(runs, max_order=1).requests
    assert (q.writers, q.transfer_size, q.write_align) == (64, 4 << 20, 1 << 16)
    [q] = predict_next_run(runs[:1], max_order=1).requests
    assert (q.writers, q.transfer_size, q.write_align) == (32, 1 << 20, 1 << 20)
    fpp = workloads.ior(runs=2, nprocs=4)
    [q, *_] = predict_next_run(fpp, max_order=1).requests
    assert (q.writers, q.transfer_size, q.write_align) == (0, 0, 0)  # nobody knew them


def test_process_count_change_follows_the_last_run():
    runs = workloads.hacc_io(runs=2, nprocs=8) + workloads.hacc_io(runs=2, nprocs=16)
    pred = predict_next_run(runs, max_order=1)
    assert len(pred.requests) == 16
    assert all(q.path.endswith("-of-00000016.data") for q in pred.requests)


def test_rank_comes_from_the_name_when_it_carries_one():
    runs = workloads.hacc_io(runs=3, nprocs=8)
    pred = predict_next_run(runs, max_order=1)
    for q in pred.requests:
        assert q.path.split("Part")[1].startswith(f"{q.rank:08d}")


def test_rank_without_name_field_is_forecast_within_seen_ranks():
    runs = [[Request("/o/summary.txt", 100, 1, rank, "app", str(r))] for r, rank in enumerate([3, 3, 3, 3, 3], 1)]
    [q] = predict_next_run(runs, max_order=1).requests
    assert (q.rank, q.path, q.run, q.write_bytes) == (3, "/o/summary.txt", "6", 100)


def test_requests_come_in_predicted_create_order():
    runs = workloads.ior(runs=3, nprocs=32)
    pred = predict_next_run(runs, max_order=1)
    times = [q.create_time for q in pred.requests]
    assert times == sorted(times)
    assert 0 < times[0] and times[-1] < 2.0


def test_duplicate_path_in_a_run_keeps_the_last_creation():
    run = [Request("/o/a", 10, 1, 0, "x", "1"), Request("/o/a", 20, 1, 0, "x", "1")]
    [q] = predict_next_run([run]).requests
    assert q.write_bytes == 20


def test_empty_last_run_predicts_nothing():
    pred = predict_next_run([workloads.ior(runs=1, nprocs=4)[0], []])
    assert pred.requests == []


def test_fits_do_not_run_when_every_series_is_constant():
    runs = workloads.ior(runs=5, nprocs=64)
    pred = predict_next_run(runs, max_order=5, workers=2)
    assert pred.grid == {"write_bytes": 0, "stripe_count": 0, "rank": 0}


@pytest.mark.parametrize(
    "runs, message",
    [
        ([], "no traced runs"),
        ([[("not", "a request")]], "expected Request"),
        ([[Request("/o/a", -5)]], "negative write_bytes"),
    ],
)
def test_bad_input_is_a_one_line_error(runs, message):
    with pytest.raises(PredictionError, match=message) as e:
        predict_next_run(runs)
    assert isinstance(e.value, IezError) and "\n" not in str(e.value)


def test_bad_options_are_errors():
    runs = workloads.ior(runs=2, nprocs=2)
    for opts in (dict(max_order=-1), dict(holdout=1.5), dict(workers=0)):
        with pytest.raises(PredictionError):
            predict_next_run(runs, **opts)


# -- accuracy ----------------------------------------------------------------------------------


def req(path, nbytes, stripes=4, rank=0):
    return Request(path, nbytes, stripes, rank)


def test_accuracy_definition():
    a = [req("/f0", 1000), req("/f1", 1000, rank=1)]
    assert accuracy(a, a) == 1.0
    assert accuracy([req("/f0", 900), req("/f1", 1000, rank=1)], a) == pytest.approx((0.9 + 1) / 2)
    assert accuracy([req("/f0", 1100), req("/f1", 3000, rank=1)], a) == pytest.approx((0.9 + 0) / 2)
    assert accuracy([req("/f0", 1000, stripes=8), a[1]], a) == 0.5  # stripe count must match
    assert accuracy([req("/f0", 1000, rank=5), a[1]], a) == 0.5  # and the rank
    assert accuracy([a[0]], a) == 0.5  # a file not predicted counts 0
    assert accuracy(a + [req("/extra", 1)], a) == pytest.approx(2 / 3)  # a spurious one too
    assert accuracy([], []) == 1.0
    assert accuracy([], a) == 0.0
    assert accuracy([req("/e", 0)], [req("/e", 0)]) == 1.0
    assert accuracy([req("/e", 5)], [req("/e", 0)]) == 0.0


# -- re-trace ----------------------------------------------------------------------------------


def test_needs_retrace_when_more_than_half_of_the_files_missed_the_plan():
    assert needs_retrace(hits=49, misses=51)
    assert not needs_retrace(hits=50, misses=50)  # exactly half: not "more than 50%"
    assert not needs_retrace(hits=100, misses=0)
    assert needs_retrace(hits=0, misses=1)
    assert not needs_retrace(hits=0, misses=0)  # no creations, no evidence
    assert needs_retrace(hits=8, misses=2, threshold=0.1)
    for bad in (dict(hits=-1, misses=0), dict(hits=1, misses=1, threshold=1.5)):
        with pytest.raises(PredictionError):
            needs_retrace(**bad)


def test_retrace_after_the_job_changes_its_names():
    """A job that moves its output elsewhere misses every planned name: re-trace."""
    runs = workloads.ior(runs=3, nprocs=8)
    plan = {q.path for q in predict_next_run(runs, max_order=1).requests}
    moved = workloads.ior(runs=1, nprocs=8, directory="/lustre/scratch/ior-v2")[0]
    hits = sum(q.path in plan for q in moved)
    assert needs_retrace(hits, len(moved) - hits)


# -- workloads ---------------------------------------------------------------------------------


def test_workloads_are_seeded_and_in_create_order():
    for gen in (workloads.ior, workloads.hacc_io, workloads.checkpoint):
        a, b = gen(runs=2, seed=9), gen(runs=2, seed=9)
        assert a == b
        for run in a:
            assert [q.create_time for q in run] == sorted(q.create_time for q in run)
        assert a != gen(runs=2, seed=10)


def test_hacc_conserves_particles_and_writes_38_bytes_each():
    runs = workloads.hacc_io(runs=5, nprocs=16, particles=1000)
    totals = [sum(q.write_bytes for q in run) for run in runs]
    assert all(t % workloads.HACC_PARTICLE_BYTES == 0 for t in totals)
    assert max(totals) - min(totals) <= 16 * workloads.HACC_PARTICLE_BYTES  # rounding only
    assert totals[0] == pytest.approx(16 * 1000 * 38, rel=1e-3)


def test_ior_stonewall_writes_whole_transfers_up_to_the_block():
    runs = workloads.ior(runs=3, nprocs=32, block=64 << 20, transfer=1 << 20, deadline=0.05)
    sizes = np.array([q.write_bytes for run in runs for q in run])
    assert np.all(sizes % (1 << 20) == 0) and np.all(sizes <= 64 << 20) and len(set(sizes)) > 5
