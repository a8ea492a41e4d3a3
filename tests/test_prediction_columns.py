"""A prediction as columns (`RequestColumns`) through the controller's path: an upload validated
into columns, stored without a `Request` per file, handed to the worker without reading it back,
and read back as columns: the same requests, in the same order, and the same plan as a prediction
of `Request`s read back from the database (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import random
import time
from dataclasses import replace

import pytest

from iez import pipeline
from iez.alloc.policy import AllocOptions
from iez.cluster import Snapshot, make_cluster
from iez.controller.api import RequestsUpload, file_columns
from iez.controller.api_client import request_json
from iez.db import Database
from iez.db.database import in_stored_order
from iez.request import Request


@pytest.fixture
def db(db_url):
    d = Database(db_url)
    yield d
    d.close()


def mixed(n: int = 40) -> list[Request]:
    """Files with every stored field set, out of create order, ties broken by rank and path."""
    out = [Request(f"/lustre/m/f.{i:03d}", (i % 5 + 1) * 3_000_000 + i, i % 4 or -1, rank=(i * 7) % 5,
                   create_time=float(i % 6), comm_size=4 if i % 3 == 0 else 1, api="mpiio" if i % 3 == 0 else "posix",
                   pool="", writers=i % 4, transfer_size=1 << 20, write_align=1 << 16, writer_segments=i % 2,
                   read_bytes=i * 1000, read_size=4096, host=f"n{i % 3}", final_path=f"/lustre/m/g.{i}" if i % 9 == 0
                   else "", name_random=6 if i % 8 == 0 else 0) for i in range(n)]
    random.Random(1).shuffle(out)
    return out


def uploaded(reqs: list[Request], app: str):
    """The columns the API makes of an upload of `reqs` (validated by pydantic's JSON parser)."""
    body = json.dumps({"requests": [request_json(q) for q in reqs]})
    return file_columns(RequestsUpload.model_validate_json(body).requests, app)


def test_uploaded_columns_are_stored_and_read_back_as_the_requests_are(db):
    reqs = mixed()
    with db.begin() as tx:
        tx.app_id("rows", create=True)
        tx.app_id("cols", create=True)
        tx.add_prediction("rows", 1, reqs, {}, [])
        tx.add_prediction("cols", 1, uploaded(reqs, "cols"), {}, [])
    with db.begin() as tx:
        rows = tx.prediction("rows", 1).requests
        assert [q.path for q in rows] == [q.path for q in sorted(reqs, key=lambda q: (q.create_time, q.rank, q.path))]
        assert tx.prediction("cols", 1).requests == [replace(q, app="cols") for q in rows]
        for app in ("rows", "cols"):
            number, cols = tx.prediction_columns(app, 1)
            assert number == 1 and list(cols) == tx.prediction(app, 1).requests


def test_columns_put_in_stored_order_are_the_read_back_ones(db):
    """What the controller hands the worker (`known`) is what the worker would have read back."""
    cols = in_stored_order(uploaded(mixed(), "a"))
    with db.begin() as tx:
        tx.app_id("a", create=True)
        pid = tx.add_prediction("a", 3, cols, {}, [])
        _, read = tx.prediction_columns("a", 3)
        _, handed = tx.prediction_columns("a", 3, {pid: cols})
        _, other = tx.prediction_columns("a", 3, {pid + 1: cols})  # not this prediction: read back
    assert handed is not read and list(handed) == list(read) == list(other)
    assert list(in_stored_order(read)) == list(read)
    fpp = uploaded([Request(f"/x/{9 - i}", 1, rank=i) for i in range(10)], "a")  # the usual job: one rank a file
    assert in_stored_order(fpp) is fpp  # the order is known without looking at the paths


def test_paths_that_break_ties_are_read_back_by_code_point(db):
    """Equal times and ranks: the path orders them, by code point on every database (a locale's
    collation would put "a" before "B"), as in_stored_order does."""
    names = ["/x/b", "/x/B", "/x/_c", "/x/a", "/x/A1", "/x/é", "/x/Z"]
    cols = uploaded([Request(p, 1) for p in names], "a")
    with db.begin() as tx:
        tx.app_id("a", create=True)
        tx.add_prediction("a", 1, cols, {}, [])
        _, read = tx.prediction_columns("a", 1)
    assert read.path == sorted(names) == in_stored_order(cols).path


def test_a_known_prediction_is_placed_as_the_stored_one(db):
    cluster = make_cluster()
    cols = in_stored_order(uploaded(mixed(200), "a"))
    with db.begin() as tx:
        tx.app_id("a", create=True)
        pid = tx.add_prediction("a", 1, cols, {}, [])

    def state():
        return pipeline.ClusterState(cluster, Snapshot.from_cluster(cluster, 1000.0), "test")

    plans = []
    for known in ({pid: cols}, None):
        def commit(tx, done):
            plans.append(pipeline.plan_text(tx, "a", 1, "balanced", done.cluster, done.placements["balanced"], 1000.0))
        pipeline.allocate(db, "a", 1, ["balanced"], state, AllocOptions(), reservation_ttl=3600, commit=commit,
                          known=known)
    assert plans[0] == plans[1] and plans[0].count("\n") > 200
    with db.begin() as tx:
        stored = tx.placement_sets("a", 1)[0]
        assert stored.ranks == {q.path: q.rank for q in cols}


def test_an_empty_upload_is_no_columns_and_times_stay_floats(db):
    assert len(file_columns([], "a")) == 0
    cols = uploaded([Request("/x/a", 1, create_time=time.time() % 1)], "a")
    assert cols.create_time.dtype.kind == "f" and list(cols)[0].path == "/x/a"
