"""A requests upload checked a field at a time over all its files (`api.requests_in_bulk`) gives
what the model gives (`RequestsUpload`, then `file_columns`), or nothing: then the model parses
it and says what is wrong; a trace upload likewise (`api.trace_in_bulk` against `TraceUpload`
and `FileRequest.request`). In process, no server."""

from __future__ import annotations

import json
from dataclasses import fields as dataclass_fields

import numpy as np
import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from conftest import fuzz_settings
from iez.controller.api import RequestsUpload, TraceUpload, file_columns, requests_in_bulk, trace_in_bulk
from iez.controller.api_client import request_json
from iez.plan import parse_layout
from iez.request import Request, RequestColumns

MiB = 1 << 20


def same(a: RequestColumns, b: RequestColumns) -> bool:
    arrays = ("write_bytes", "stripe_count", "create_time", "pool", "read_bytes")
    return (list(a.path) == list(b.path) and all(np.array_equal(getattr(a, k), getattr(b, k)) for k in arrays)
            and all(getattr(a, k).dtype == getattr(b, k).dtype for k in arrays)
            and (a.pools, a.app, a.run) == (b.pools, b.app, b.run)
            and {k: list(c) for k, c in a.more.items()} == {k: list(c) for k, c in b.more.items()})


def by_model(raw: bytes) -> tuple[RequestColumns, int | None] | None:
    try:
        body = RequestsUpload.model_validate_json(raw)
    except ValidationError:
        return None
    return file_columns(body.requests, "app"), body.run


def files(n: int = 40) -> list[dict]:
    """What ControllerClient sends for a varied job: every field used somewhere."""
    return [request_json(Request(f"/fs/job/out.{i:04d}", (i + 1) * MiB + i, i % 5 - 1, rank=i, create_time=0.5 * i,
                                 comm_size=1 + i % 3, api=("posix", "mpiio", "stdio", "hdf5")[i % 4],
                                 pool="fast" if i % 7 == 0 else "", writers=i % 4, transfer_size=MiB * (i % 2),
                                 write_align=1 << (i % 20), writer_segments=i % 3, read_bytes=i * 1000,
                                 read_size=4096 * (i % 2), host=f"nid{i % 3:05d}" if i % 2 else "",
                                 final_path=f"/fs/job/final.{i}" if i % 5 == 0 else "", name_random=i % 9))
            for i in range(n)]


def test_a_clients_upload_gives_the_models_columns():
    for body in ({"requests": files()}, {"requests": files(), "run": 7},
                 {"run": None, "requests": [{"path": "/fs/a", "write_bytes": 1}, {"write_bytes": 2, "path": "/fs/b"}]},
                 {"requests": [{"path": "/fs/a", "write_bytes": 1, "create_time": 3}]}):  # an int for a float
        raw = json.dumps(body).encode()
        got, want = requests_in_bulk(raw, "app"), by_model(raw)
        assert got is not None and want is not None and same(got[0], want[0]) and got[1] == want[1]


BAD = [  # each refused by the model: the bulk path leaves them all to it
    [1], {"requests": [{"path": "/fs/a", "write_bytes": 1}], "extra": 1},
    {"requests": [{"path": "/fs/a", "write_bytes": 1}] * 2},
    *({"requests": [{"path": "/fs/a", "write_bytes": 1, **bad}]} for bad in (
        {"path": "relative"}, {"path": "/a\tb"}, {"path": ""}, {"path": "/a\nb"}, {"final_path": "/a\0b"},
        {"path": "/" + "x" * 5000}, {"write_bytes": -1},
        {"write_bytes": 1 << 60}, {"write_bytes": 1.5}, {"write_bytes": True}, {"stripe_count": 2001},
        {"stripe_count": "4"}, {"rank": -1}, {"rank": 1 << 31}, {"comm_size": 0}, {"api": "fortran"},
        {"pool": "a-pool-name-too-long"}, {"pool": "bad pool"}, {"create_time": -1}, {"create_time": "soon"},
        {"write_align": 3 * 4096}, {"writers": 2.5}, {"host": "-x"}, {"final_path": "x"}, {"name_random": 65},
        {"placed": 1}, {"read_collective": "yes"}, {"unknown": 1})),
    {"requests": [{"write_bytes": 1}]}, {"requests": [{"path": "/fs/a", "write_bytes": 1}], "run": 0},
]


@pytest.mark.parametrize("body", BAD)
def test_what_the_model_refuses_is_left_to_it(body):
    raw = json.dumps(body).encode()
    assert by_model(raw) is None and requests_in_bulk(raw, "app") is None


def test_what_only_the_model_reads_is_left_to_it():
    """No files (the controller refuses them), sizes as text, an observed layout, JSON the parser
    refuses: the model's to take or refuse."""
    for raw in (b'{"requests": []}', b'{"requests": [{"path": "/fs/a", "write_bytes": "1GiB"}]}',
                b'{"requests": [{"path": "/fs/a", "write_bytes": 1, "observed": "S=1048576,c=1"}]}',
                b'{"requests": [{"path": "/fs/a", "write_bytes": 1, "create_time": NaN}]}', b"[" * 300, b"{"):
        assert requests_in_bulk(raw, "app") is None


json_scalars = st.none() | st.booleans() | st.integers(-(1 << 62), 1 << 62) | st.floats() | st.text(max_size=6)
fields = st.sampled_from(["path", "write_bytes", "stripe_count", "rank", "comm_size", "create_time", "api", "pool",
                          "writers", "write_align", "host", "final_path", "name_random", "placed", "read_bytes", "x"])


@pytest.mark.fuzz
@fuzz_settings(200)
@given(changes=st.lists(st.tuples(st.integers(0, 3), fields, json_scalars | st.sampled_from(
    ["/fs/z", "mpiio", "fast", "nid1", 0, 1, 4096, 1 << 50])), max_size=4), run=json_scalars)
def test_fuzz_the_bulk_path_takes_only_what_the_model_takes_and_gives_the_same(changes, run):
    body = files(4)
    for i, name, value in changes:
        body[i][name] = value
    raw = json.dumps({"requests": body, "run": run}).encode()
    got, want = requests_in_bulk(raw, "app"), by_model(raw)
    assert got is None or (want is not None and same(got[0], want[0]) and got[1] == want[1]), (got, want)


def every_field(reqs: list[Request]) -> list[tuple]:
    """Each request's every field (`==` leaves some out: observed, host, ...)."""
    return [tuple(getattr(q, f.name) for f in dataclass_fields(Request)) for q in reqs]


def trace_by_model(raw: bytes) -> tuple[TraceUpload, list[tuple], list[tuple]] | None:
    try:
        body = TraceUpload.model_validate_json(raw)
    except ValidationError:
        return None
    return (body.model_copy(update={"requests": [], "reads": []}), every_field([r.request("app") for r in body.requests]),
            every_field([r.request("app") for r in body.reads]))


def trace_in_bulk_as_model(raw: bytes) -> tuple[TraceUpload, list[tuple], list[tuple]] | None:
    got = trace_in_bulk(raw, "app")
    return None if got is None else (got[0], every_field(got[1]), every_field(got[2]))


def traced(n: int = 40) -> list[dict]:
    """What ControllerClient sends of a trace: `files` with the layouts they got (plain and PFL,
    some shared), some placed from the plan, some read collectively."""
    layouts = ["S=1048576,c=4,o=1:2:3:4", "S=4194304,c=1,o=7", "0-67108864/S=1048576,c=1,o=3;67108864-EOF/S=1048576,c=2,o=5:6"]
    out = files(n)
    for i, f in enumerate(out):
        f.update({"placed": i % 3 == 0, "observed": layouts[i % 3]} if i % 4 else {})
        if i % 6 == 1:
            f["read_collective"] = True
    return out


def test_a_clients_trace_upload_gives_the_models_requests():
    reads = [{**f, "path": f["path"] + ".in", "write_bytes": 0} for f in traced(6)]
    for body in ({"requests": traced()}, {"requests": traced(), "reads": reads, "run": 3, "label": "slurm-1",
                                          "source": "darshan", "nprocs": 64, "plan_hits": 30, "plan_misses": 10,
                                          "warnings": ["a", "b"]},
                 {"requests": [], "reads": reads}, {"requests": []},
                 {"requests": [{"path": "/fs/a", "write_bytes": 1}, {"write_bytes": 2, "path": "/fs/b",
                                                                     "observed": "S=65536,c=1,o=0"}]}):
        raw = json.dumps(body).encode()
        got, want = trace_in_bulk_as_model(raw), trace_by_model(raw)
        assert got is not None and got == want
    got = trace_in_bulk(json.dumps({"requests": traced(9)}).encode(), "app")
    assert got is not None and got[1][1].observed == parse_layout("S=4194304,c=1,o=7") and got[1][0].observed is None


TRACE_BAD = [  # a trace the model refuses: all left to it
    *({**b, "reads": []} for b in BAD[1:-2] if isinstance(b, dict)),
    {"requests": [{"path": "/fs/a", "write_bytes": 1}], "reads": [{"path": "/fs/a", "write_bytes": 0}]},
    {"requests": [], "reads": [{"path": "/fs/a", "write_bytes": 0}] * 2},
    *({"requests": [{"path": "/fs/a", "write_bytes": 1, **bad}]} for bad in (
        {"observed": "S=1048576,c=2,o=1"}, {"observed": "nonsense"}, {"observed": 4}, {"observed": "x" * 70000})),
    *({"requests": [], **bad} for bad in (
        {"warnings": ["w"] * 1001}, {"warnings": [1]}, {"warnings": "w"}, {"source": "strace"},
        {"label": "x" * 256}, {"nprocs": -1}, {"plan_hits": "3"}, {"run": 0}, {"reads": "x"}, {"reads": [1]})),
]


@pytest.mark.parametrize("body", TRACE_BAD)
def test_a_trace_the_model_refuses_is_left_to_it(body):
    raw = json.dumps(body).encode()
    assert trace_by_model(raw) is None and trace_in_bulk(raw, "app") is None


@pytest.mark.fuzz
@fuzz_settings(200)
@given(changes=st.lists(st.tuples(st.integers(0, 3), fields | st.sampled_from(["observed", "read_collective"]),
                                  json_scalars | st.sampled_from(["/fs/z", "S=1048576,c=1,o=2", "S=1048576,c=2,o=2",
                                                                  True, 0, 1, 4096])), max_size=4),
       head=st.dictionaries(st.sampled_from(["run", "label", "source", "nprocs", "plan_hits", "warnings", "x"]),
                            json_scalars | st.sampled_from(["libiez", "darshan", ["w"]]), max_size=2))
def test_fuzz_the_trace_bulk_path_takes_only_what_the_model_takes_and_gives_the_same(changes, head):
    body = traced(4)
    for i, name, value in changes:
        body[i][name] = value
    raw = json.dumps({"requests": body[:3], "reads": body[3:], **head}).encode()
    got, want = trace_in_bulk_as_model(raw), trace_by_model(raw)
    assert got is None or got == want, (got, want)
