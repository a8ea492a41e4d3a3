"""collread=lustre through the controller's HTTP upload (docs/controller.md, "Upload bodies";
docs/plan-format.md, `collread`): the client sends each file's `read_collective` with the layout
the trace saw, the controller keeps the run's striped collectively read files in its meta
(`pipeline.collective_reads`), and the plan its worker serves asks for the Lustre-aware
collective read, for a job that writes and for one that only reads. A real `iez controller`
process on loopback."""

from __future__ import annotations

from iez import plan as planfile
from iez.controller.api_client import ControllerClient, request_json
from iez.plan import parse_layout
from iez.request import Request
from plugins.controller_process import fresh_stats
from plugins.controller_stack import SITE, MiB

STRIPED = parse_layout("S=1048576,c=2,o=2:3")
ONE_OST = parse_layout("S=1048576,c=1,o=2")
OUT = Request("/fs/sim/out.0", 64 * MiB, 2, observed=parse_layout("S=1048576,c=2,o=0:1"))


def read(path: str, layout=STRIPED, collective: bool = True) -> Request:
    return Request(path, 0, read_bytes=1 << 30, read_size=MiB, observed=layout, read_collective=collective)


def test_an_uploaded_collective_read_of_a_striped_file_gets_collread(controller):
    c = controller()
    fresh_stats(c)
    with ControllerClient(c.url, SITE) as client:
        # written and read collectively (a restart file over two OSTs); only read (analysis)
        client.upload_ingested("sim", [OUT], reads=[read("/fs/sim/restart.h5")])
        got = client.upload_ingested("post", [], reads=[read("/fs/sim/out.0")])
        assert "asks for the Lustre-aware collective read" in got["notes"][-1], got
        # not collread: read independently, a file on one OST, a layout the trace did not see
        client.upload_ingested("indep", [OUT], reads=[read("/fs/in.h5", collective=False)])
        client.upload_ingested("one", [OUT], reads=[read("/fs/in.h5", ONE_OST)])
        client.upload_ingested("unseen", [OUT], reads=[read("/fs/in.h5", None)])
        client.upload_ingested("indep-ro", [], reads=[read("/fs/in.h5", collective=False)])
        plans = {app: client.fetch_plan(app, wait=30) for app in ("sim", "post", "indep", "one", "unseen")}
        for app, reply in plans.items():
            assert reply.status == "ready", (app, reply, c.log())
        served = {app: planfile.loads(reply.text) for app, reply in plans.items()}
        assert list(served["sim"].entries) == [OUT.path] and served["sim"].meta["collread"] == "lustre"
        assert len(served["post"]) == 0 and served["post"].meta["collread"] == "lustre", served["post"].meta
        for app in ("indep", "one", "unseen"):
            assert "collread" not in served[app].meta and len(served[app]) == 1, (app, served[app].meta)
        assert client.fetch_plan("indep-ro").status == "none"  # read-only, not collectively: no plan


def test_an_old_client_body_is_taken_and_a_bad_flag_refused_in_one_line(controller):
    c = controller()
    old = {"requests": [], "reads": [{"path": "/fs/in.h5", "write_bytes": 0, "observed": "S=1048576,c=2"}]}
    r = c.post("/apps/old/traces", json=old)  # no read_collective: read independently, as before the field
    assert r.status_code == 201 and r.json()["reads"] == 1, r.text
    assert "no plan to make" in r.json()["notes"][-1], r.json()
    sent = request_json(read("/fs/in.h5"), observed=True)
    assert sent["read_collective"] is True and "read_collective" not in request_json(read("/fs/in.h5"))
    for bad in ("yes", 1, None):
        r = c.post("/apps/bad/traces", json={"requests": [], "reads": [{**sent, "read_collective": bad}]})
        detail = r.json()["detail"]
        assert r.status_code == 422 and "read_collective" in detail and "\n" not in detail, r.text
