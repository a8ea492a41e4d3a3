"""Files placed per writer, by the writer's node (docs/allocation.md, `bpio`; docs/libiez.md,
IEZ_HOST): a job whose ranks run under mpiexec with different node names, each creating its own
file under libiez on the emulated cluster, is traced (the shards carry each rank's node), predicted
(the requests keep their creator), placed by `iez allocate --policy bpio` on a cluster whose
topology lists client nodes (no rank ranges), and run again from the plan: each rank's file lands,
read back through the backend, on the OSTs its node's path reaches. A rank on a node the topology
does not list is placed as without topology, and the plan says so (`off_topology`)."""

from __future__ import annotations

from pathlib import Path

from test_bpio_e2e import CLUSTER as E2E_CLUSTER
from test_bpio_e2e import controller_plan, placed_twice, run_job

from iez import plan as planfile
from iez.backend import backend_for
from iez.db import Database

# rank -> node: not in rank order, so that only the node can bind a rank to its group
HOSTS = ["n3", "n1", "n4", "n2", "stranger"]
# test_bpio_e2e's OSSs and routers (r0 serves oss0-1, r1 oss2-3), its client groups by node
CLUSTER = E2E_CLUSTER[:E2E_CLUSTER.index("[[client_group]]")] + """
[[client_group]]
name = "left"
nodes = ["n[1-2]"]
routers = ["r1"]
[[client_group]]
name = "right"
nodes = ["n[3-4]"]
routers = ["r0"]
"""
REACH = {"n1": {4, 5, 6, 7}, "n2": {4, 5, 6, 7}, "n3": {0, 1, 2, 3}, "n4": {0, 1, 2, 3}}


def test_each_rank_lands_on_the_osts_of_its_nodes_path(iez_cmd, subenv, tmp_path):
    plan, db = placed_twice(iez_cmd, subenv, tmp_path, CLUSTER,
                            lambda emu, run, mode, plan: run_job(subenv, tmp_path, emu, run, mode, plan, HOSTS))
    with Database(db) as d, d.begin() as tx:
        [(_, traced), (_, again)] = tx.traced_runs("ior")
        predicted = tx.prediction("ior").requests
    # the trace and the prediction keep each file's creator: its rank and its node
    want = {f"out.{r:04d}": (r, h) for r, h in enumerate(HOSTS)}
    assert {Path(q.path).name: (q.rank, q.host) for q in traced} == want
    assert {Path(q.path).name: (q.rank, q.host) for q in predicted} == want
    planned = {Path(p).name: fl.osts() for p, fl in plan.entries.items()}
    # every file where its entry put it, read back through the backend
    landed = {Path(q.path).name: backend_for(q.path).get_layout(q.path).osts() for q in again}
    assert landed == planned and len(planned) == len(HOSTS)
    for name, (_, host) in want.items():
        if host in REACH:
            assert set(planned[name]) <= REACH[host], (name, host, planned[name])
    # bpio spread them: no OST carries two stripes (the unlisted node's counts as the others')
    assert len({o for osts in planned.values() for o in osts}) == sum(map(len, planned.values()))
    assert plan.meta["off_topology"] == "stranger" and plan.meta["policy"] == "bpio"


def test_the_plan_names_the_nodes_placed_without_topology():
    from iez.alloc.bpio import off_topology
    from iez.cluster import parse_cluster
    from iez.pipeline import make_plan
    from iez.request import Request

    cluster = parse_cluster(CLUSTER)
    assert cluster.topology is not None
    reqs = [Request(f"/f/{i}", 1, rank=i, host=h) for i, h in enumerate(["n1.site.org", "n9", "", "n3", "a b"])]
    # a node matches by its short name too; one without a name is its rank
    assert off_topology(reqs, cluster.topology) == ["a b", "n9", "rank2"]
    meta = make_plan("a", 1, "bpio", cluster, [], off_topology=["n9", "a b", *(f"x{i}" for i in range(20))]).meta
    assert meta["off_topology"] == ",".join(["n9", *(f"x{i}" for i in range(15)), "+6"])
    assert planfile.loads(planfile.dumps(make_plan("a", 1, "bpio", cluster, [], off_topology=["n9"]))).meta[
        "off_topology"] == "n9"


def test_the_controller_binds_by_node_and_notes_the_unlisted(tmp_path):
    """The controller, with `policy = "bpio"`, places uploaded requests by their creators' nodes
    and serves a plan that names the node its topology lacks."""
    from plugins.controller_stack import plan_osts

    from iez.request import Request

    text = controller_plan(tmp_path, CLUSTER, [Request(f"/fs/out.{r:04d}", 2 << 20, 1, rank=r, host=h)
                                               for r, h in enumerate(HOSTS)])
    got = plan_osts(text)
    assert all(set(got[f"/fs/out.{r:04d}"]) <= REACH[h] for r, h in enumerate(HOSTS) if h in REACH), got
    assert planfile.loads(text).meta["off_topology"] == "stranger"
