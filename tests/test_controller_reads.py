"""The controller's trace upload with reads and the request fields of real workloads
(writer_segments, read_bytes, read_size, host, final_path): their bounds, checked before any of
it is stored, and a run that only read files, stored without prediction work."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from iez.cluster import make_cluster
from iez.controller.api import FileRequest, TraceUpload
from iez.controller.api_client import request_json
from iez.controller.service import Controller, NotFound, Settings
from iez.controller.work import pending_work
from iez.request import Request
from plugins.controller_stack import SITE

MiB = 1 << 20
FULL = Request("/fs/ckpt.0", 64 * MiB, 4, comm_size=8, writers=8, transfer_size=MiB, write_align=MiB,
               writer_segments=16, read_bytes=3 * MiB, read_size=MiB, host="nid00042.hsn",
               final_path="/fs/ckpt.final")
READ = Request("/fs/input.h5", 0, 2, read_bytes=1 << 40, read_size=4 * MiB, host="nid00001")


def test_the_request_fields_go_through_the_upload():
    back = FileRequest.model_validate(request_json(FULL)).request("")
    assert back == FULL and (back.host, back.final_path) == (FULL.host, FULL.final_path)  # compare=False ones
    old = FileRequest.model_validate({"path": "/fs/old", "write_bytes": 1}).request("")
    assert (old.writer_segments, old.read_bytes, old.read_size, old.host, old.final_path) == (0, 0, 0, "", "")
    assert FileRequest.model_validate({"path": "/fs/x", "write_bytes": 0, "read_bytes": "2GiB"}).read_bytes == 2 << 30
    # a host name the controller would refuse is left out by the client, not the whole upload
    assert request_json(Request("/fs/x", 1, host="bad host!"))["host"] == ""


@pytest.mark.parametrize("bad", [
    {"writer_segments": -1}, {"writer_segments": 1 << 31}, {"writer_segments": 1.5},
    {"read_bytes": -1}, {"read_bytes": 1 << 53}, {"read_bytes": "lots"},
    {"read_size": -1}, {"read_size": 1 << 53}, {"read_size": "1MiB"},
    {"host": "two words"}, {"host": "-lead"}, {"host": "h" * 65}, {"host": 7},
    {"final_path": "relative/name"}, {"final_path": "/fs/new\nline"}, {"final_path": "/" + "d" * 4096},
])
def test_out_of_bounds_request_fields_are_refused(bad):
    with pytest.raises(ValidationError):
        FileRequest.model_validate({"path": "/fs/x", "write_bytes": 1, **bad})


def test_reads_are_listed_once_and_apart_from_the_files_created():
    ok = {"requests": [request_json(FULL)], "reads": [request_json(READ)]}
    assert [r.path for r in TraceUpload.model_validate(ok).reads] == [READ.path]
    with pytest.raises(ValidationError, match="listed twice"):
        TraceUpload.model_validate({"requests": [], "reads": [request_json(READ)] * 2})
    with pytest.raises(ValidationError, match="both created and only read"):
        TraceUpload.model_validate({"requests": [request_json(FULL)], "reads": [request_json(FULL)]})


def test_a_run_that_only_read_is_stored_and_makes_no_plan(tmp_path):
    ctl = Controller(Settings(make_cluster(n_oss=2, osts_per_oss=2), f"sqlite:///{tmp_path / 'db'}", gate=None,
                              site_key=SITE))
    try:
        got = ctl.upload_trace("dlio", [], reads=[READ], label="job1")
        assert (got["run"], got["files"], got["reads"]) == (1, 0, 1)
        assert "no plan to make" in got["notes"][-1]
        with ctl.db.begin() as tx:
            assert pending_work(tx) == []  # nothing to predict from
            [back] = tx.run_reads("dlio", 1)
        assert back == replace(READ, app="dlio", run="1") and back.host == READ.host
        assert not ctl.step()
        with pytest.raises(NotFound, match="its next run should be traced"):
            ctl.plan("dlio")
        ctl.upload_trace("dlio", [FULL], reads=[READ])  # a run that wrote: its next run is to predict
        with ctl.db.begin() as tx:
            assert [(w.kind, w.app, w.run) for w in pending_work(tx)] == [("predict", "dlio", 2)]
            assert [(i.n_traced, i.n_reads) for i in tx.runs("dlio")] == [(0, 1), (1, 1)]
    finally:
        ctl.close()


def test_the_controller_process_takes_reads_over_http(controller):
    c = controller()
    body = {"label": "job1", "requests": [], "reads": [request_json(READ)]}
    r = c.post("/apps/dlio/traces", json=body)
    assert r.status_code == 201, r.text
    assert (r.json()["files"], r.json()["reads"]) == (0, 1)
    bad = {"requests": [], "reads": [{**request_json(READ), "read_size": -1}]}
    r = c.post("/apps/dlio/traces", json=bad)
    assert r.status_code == 422 and "\n" not in r.json()["detail"] and "read_size" in r.json()["detail"]
    [run] = c.get("/apps/dlio").json()["runs"]  # the refused upload stored nothing
    assert (run["run"], run["files"], run["reads"]) == (1, 0, 1)
