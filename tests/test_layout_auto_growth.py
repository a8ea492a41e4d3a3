"""The automatic layout of files that grow and of segmented shared files (iez.layout.auto,
docs/layouts.md): the predictor marks a file whose bytes rose over the traced runs; its layout
serves the predicted bytes and widens past them (PFL), never slower on the simulator than the
user's layout whatever it grows to; a segmented file's stripes follow the writers' blocks."""

from __future__ import annotations

import pytest

from conftest import need_built
from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster
from iez.demo.simulate import seed000_hardware, simulate_rates
from iez.layout import auto
from iez.layout.layout import LUSTRE_EOF
from iez.predict.aipa import predict_next_run
from iez.request import Request
from iez.sim import engine

MIB, GIB = 1 << 20, 1 << 30
TESTBED = auto.Servers(tuple([4e8] * 15), tuple([1.25e9] * 3), 1.25e9)  # the seed-000 testbed's model
CLUSTER = seed000_hardware(make_cluster(ost_size=1 << 40))


def place(requests, layout="auto", policy="balanced"):
    return get_policy(policy).place(requests, CLUSTER, Snapshot.from_cluster(CLUSTER), AllocOptions(layout=layout))


# -- the predictor ---------------------------------------------------------------------------------

def runs_of(sizes: list[int]) -> list[list[Request]]:
    return [[Request("/m/app/ckpt", b, 1, app="app", run=str(k + 1), writers=1)] for k, b in enumerate(sizes)]


@pytest.mark.parametrize("sizes,grows", [([GIB, 2 * GIB, 3 * GIB], True), ([GIB, GIB, 2 * GIB], True),
                                         ([GIB, GIB, GIB], False), ([3 * GIB, 2 * GIB, GIB], False),
                                         ([GIB, 3 * GIB, 2 * GIB], False), ([GIB], False)])
def test_the_predictor_marks_files_whose_bytes_rose(sizes, grows):
    (r,) = predict_next_run(runs_of(sizes), workers=1).requests
    assert r.grows is grows


def test_the_predictor_carries_the_writers_extents_last_known():
    runs = [[Request("/m/ior", GIB, 1, app="ior", run=str(k + 1), writers=8, writer_segments=s)]
            for k, s in enumerate([4, 0])]
    (r,) = predict_next_run(runs, workers=1).requests
    assert r.writer_segments == 4


# -- the cost model --------------------------------------------------------------------------------

def test_growth_count_is_where_the_model_goes_as_bytes_grow():
    """A lone writer's 1 GiB file: 4 stripes keep its link busy (each object costs an RPC); as
    its bytes grow the objects' cost fades and the model spreads it over every OST."""
    shape = auto.FileShape(GIB, 1)
    assert auto.choose(shape, TESTBED).stripe_count == 4
    assert auto.growth_count(shape, TESTBED) == 15
    grown = auto.choose(auto.FileShape(GIB, 1, grows=True), TESTBED)
    assert grown.components == ((GIB, 4), (LUSTRE_EOF, 15)) and grown.stripe_count == 15
    assert "grows" in grown.reason


def test_a_growing_file_already_as_wide_as_the_model_goes_stays_plain():
    ch = auto.choose(auto.FileShape(16 * GIB, 16, grows=True), TESTBED)
    assert ch.components == () and ch.stripe_count == 15 and "no wider" in ch.reason


def test_a_growing_file_of_a_file_per_process_run_keeps_its_runs_share():
    """1,000 files of a run: the OSTs are shared by the run's files whatever the count, so the
    tail is no wider than the files' share of them allows to gain."""
    shape = auto.FileShape(GIB, 1, job_bytes=1000 * GIB, grows=True)
    plain = auto.choose(auto.FileShape(GIB, 1, job_bytes=1000 * GIB), TESTBED).stripe_count
    t = auto.write_time(shape, TESTBED, [plain, auto.growth_count(shape, TESTBED)])
    assert t[1] <= t[0] * (1 + 1e-9)


# -- through the policies --------------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["balanced", "rr", "qos", "iez-paper"])
def test_a_growing_file_gets_its_layout_up_to_the_prediction_then_a_wider_tail(policy):
    r = Request("/m/app/ckpt", GIB, 1, app="app", run="3", writers=1, grows=True)
    (plain,) = place([Request("/m/app/ckpt", GIB, 1, app="app", run="3", writers=1)], policy=policy)
    (p,) = place([r], policy=policy)
    head, tail = p.layout.components
    # the predicted bytes are placed as the plain automatic layout places them
    assert head.start == 0 and head.end >= GIB and head.end % head.layout.stripe_size == 0
    assert head.layout.stripe_count == plain.layout.plain.stripe_count
    assert head.layout.stripe_size == plain.layout.plain.stripe_size
    assert tail.end == LUSTRE_EOF and tail.layout.stripe_count > head.layout.stripe_count
    assert len(set(tail.layout.osts)) == tail.layout.stripe_count
    assert "it grows" in p.note


def test_hierarchical_leaves_a_growing_shared_file_its_growth_layout():
    """Its writers' blocks move as it grows, so a cut made for the predicted bytes would not
    follow them. Nor is one already as wide as the model goes, which has no tail."""
    def ssf(size):
        return Request("/m/ssf", size, 1, app="app", run="2", writers=2, writer_segments=1, grows=True)

    (p,) = place([ssf(64 * MIB)], layout="hierarchical")
    assert len(p.layout.components) == 2 and "it grows:" in p.note and "not hierarchical: it grows" in p.note
    (wide,) = place([ssf(4 * GIB)], layout="hierarchical")  # no tail, and still not cut
    assert wide.layout.plain is not None and "no wider" in wide.note
    assert "not hierarchical: it grows" in wide.note


@pytest.fixture(scope="module")
def sim_engine() -> str:
    need_built(engine.engine_path())
    return engine.engine_path()


@pytest.mark.parametrize("writers", [1, 4])
def test_a_growing_file_is_never_slower_than_the_users_layout_whatever_it_grows_to(tmp_path, sim_engine, writers):
    """Simulated (seed-000 testbed hardware): the file predicted at 1 GiB written at 1, 2 and 4
    GiB on the user's layout (one stripe, Lustre RR), the plain automatic one and the growth one.
    At the predicted size the growth layout places the bytes as the plain one; past it, its tail
    spreads them over every OST, and the write is faster still."""
    def req(grows=False, size=GIB):
        return Request("/m/app/ckpt", size, 1, app="app", run="3", writers=writers, comm_size=writers, grows=grows)

    (user,) = place([req()], layout="keep", policy="rr")
    (plain,) = place([req()])
    (grown,) = place([req(grows=True)])
    for k, size in enumerate((GIB, 2 * GIB, 4 * GIB)):
        t = {}
        for name, p in (("user", user), ("plain", plain), ("grown", grown)):
            rates = simulate_rates(CLUSTER, [req(size=size)], {p.path: p.layout}, workdir=tmp_path / f"{name}{k}")
            t[name] = (size / rates.write_bw, size / rates.read_bw)
        assert t["grown"][0] <= t["user"][0] * (1 + 1e-6) and t["grown"][1] <= t["user"][1] * (1 + 1e-6), (size, t)
        if size == GIB or not grown.layout.is_composite:  # 4 writers: already on all 15 OSTs, no tail
            assert t["grown"] == pytest.approx(t["plain"], rel=1e-6)
        else:
            assert t["grown"][0] < t["plain"][0], (size, t)  # reads: the one client's link bounds both
    assert grown.layout.is_composite == (writers == 1)


# -- segmented shared files ------------------------------------------------------------------------

def test_block_stripe_follows_the_writers_blocks_where_that_pays():
    ior = 8 * 4 * 16 * MIB  # IOR -b 16m -s 4, 8 writers: 32 blocks
    assert auto.block_stripe(ior, 8, 4, 16, MIB) == 16 * MIB  # 2 blocks of one writer an object
    assert auto.block_stripe(ior, 8, 4, 4, MIB) == 16 * MIB  # 2 writers an object, the fewest 4 allow
    assert auto.block_stripe(8 * 4 * 6 * GIB, 8, 4, 8, MIB) == 2 * GIB  # at 4 GiB and more: a power of two dividing it
    assert auto.block_stripe(ior, 8, 4, 15, MIB) == 0  # 32 blocks on 15 objects: uneven
    assert auto.block_stripe(8 * 3 * 16 * MIB, 8, 3, 12, MIB) == 0  # 12 objects: writers split across them
    assert auto.block_stripe(8 * 16 * MIB, 8, 1, 8, MIB) == 0  # one block each: Method II
    assert auto.block_stripe(ior, 8, 0, 16, MIB) == 0  # not known
    assert auto.block_stripe(8 * 4 * (16 * MIB + 4096), 8, 4, 16, MIB) == 0  # blocks off the writes' unit
    assert auto.block_stripe(ior + 1, 8, 4, 16, MIB) == 0  # not whole blocks


def test_a_segmented_file_gets_stripes_inside_each_writers_block():
    """IOR -b 16m -s 4 with 8 writers on 16 OSTs: each object holds the blocks of one writer.
    Method II's one round would put every writer's bytes in every object."""
    cluster = make_cluster(4, 4)

    def ior(segments):
        return [Request("/m/ior", 8 * 4 * 16 * MIB, 1, app="ior", run="1", writers=8, comm_size=8,
                        transfer_size=MIB, writer_segments=segments)]

    (p,) = get_policy("balanced").place(ior(4), cluster, Snapshot.from_cluster(cluster), AllocOptions())
    lay = p.layout.plain
    assert lay.stripe_count == 16 and lay.stripe_size == 16 * MIB and "inside one writer's block" in p.note
    (one,) = get_policy("balanced").place(ior(1), cluster, Snapshot.from_cluster(cluster), AllocOptions())
    assert one.layout.plain.stripe_size == 32 * MIB  # one block each: one round of stripes, as before
