"""The automatic layout's stripe size as a multiple of the writes' unit: rounded up, unless a
small rest over whole rounds would leave whole OSTs empty (iez.layout.auto.round_size)."""

from __future__ import annotations

from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster
from iez.emulated.usage import file_ost_bytes
from iez.layout.auto import busiest_object, round_size
from iez.metrics import balance_report, integer_bound
from iez.request import Request

MiB = 1 << 20


def test_busiest_object_is_whole_rounds_then_the_rest_from_the_first():
    assert busiest_object(60 * MiB + 2048, 15, 5 * MiB) == 5 * MiB  # 12 full stripes, 3 empty
    assert busiest_object(60 * MiB + 2048, 15, 4 * MiB) == 4 * MiB + 2048
    assert busiest_object(100 * MiB, 4, 8 * MiB) == 3 * 8 * MiB + 4 * MiB


def test_round_size_goes_down_only_when_that_fills_the_objects_more_evenly():
    # Method II gives 4 MiB + 128 KiB for 60 MiB + 2 KiB on 15 stripes: up is 5 MiB, down 4 MiB
    assert round_size(60 * MiB + 2048, 15, 4 * MiB + 128 * 1024, MiB) == 4 * MiB
    # whole rounds already: rounding up changes nothing, down would wrap a whole round more
    assert round_size(64 * MiB, 16, 4 * MiB, MiB) == 4 * MiB
    # 30 MiB on 4 stripes (7.5 MiB each): 8 MiB stripes fill 3 OSTs and 6 MiB on the 4th, 7 MiB
    # stripes put 7 + 1 MiB on the first: up is as even and stays
    assert round_size(30 * MiB, 4, 7 * MiB + 512 * 1024, MiB) == 8 * MiB
    assert round_size(MiB // 2, 2, 256 * 1024, MiB) == MiB  # never below the unit


def test_a_small_tail_does_not_empty_whole_stripes():
    # An HDF5 shared file: 60 MiB of data and 2 KiB of metadata by 5 writers of 1 MiB on the 15-OST testbed
    c = make_cluster(ost_size=1 << 30)
    size = 60 * MiB + 2048
    r = Request(path="/x/testFile", write_bytes=size, comm_size=5, writers=5, transfer_size=MiB, write_align=MiB,
                app="hdf5", api="hdf5")
    (p,) = get_policy("balanced").place([r], c, Snapshot.from_cluster(c), AllocOptions(layout="auto"))
    assert (p.layout.plain.stripe_count, p.layout.plain.stripe_size) == (15, 4 * MiB)
    cost = balance_report(c, file_ost_bytes(size, p.layout)).job.ost_cost
    assert cost <= 1.1 * integer_bound(round(size / MiB), 15), (cost, p.layout, p.note)


def test_no_object_is_left_empty_by_rounding_up():
    # 8 files of 64 MiB on the 15-OST testbed: the model's 9 stripes, rounded up to 8 MiB, fill only 8
    c = make_cluster(ost_size=1 << 30)
    reqs = [Request(path=f"/x/f{i}", write_bytes=64 * MiB, writers=1, transfer_size=MiB, write_align=MiB, app="a")
            for i in range(8)]
    for p in get_policy("balanced").place(reqs, c, Snapshot.from_cluster(c), AllocOptions(layout="auto")):
        per_ost = file_ost_bytes(64 * MiB, p.layout)
        assert len(p.layout.plain.osts) == len(per_ost) and min(per_ost.values()) > 0, (p.layout, p.note)
