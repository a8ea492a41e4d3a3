"""The controller's worker path on a policy's Placements (arrays): the same answers as on one
Placement per file, for plain, hierarchical and PFL layouts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from iez import pipeline
from iez.alloc.policy import AllocOptions, Placements
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster
from iez.db import Database
from iez.errors import AllocationError
from iez.plan import dumps
from iez.request import Request


def requests(n: int = 60) -> list[Request]:
    return [Request(f"/lustre/b/out.{i}", (i % 7 + 1) * 9_000_000 + i, i % 5 or -1, rank=i, app="b", run="2",
                    comm_size=8 if i % 3 == 0 else 1, writers=8 if i % 3 == 0 else 0, writer_segments=1,
                    api="mpiio" if i % 3 == 0 else "posix", grows=i % 11 == 0) for i in range(n)]


@pytest.fixture
def placed() -> tuple[list[Request], Placements]:
    cluster = make_cluster()
    reqs = requests()
    got = get_policy("balanced").place(reqs, cluster, Snapshot.from_cluster(cluster), AllocOptions(layout="hierarchical"))
    assert isinstance(got, Placements) and got.replaced and any(got.table.components)
    return reqs, got


def test_placements_keep_their_arrays_and_take_the_policy_name(placed):
    reqs, got = placed
    named = pipeline.as_placed(got, reqs, "b", 2, "mine")
    assert isinstance(named, Placements)
    assert list(named) == [replace(p, policy="mine") for p in got]
    assert pipeline.noted(named) == [p for p in named if p.note] != []
    copied = pipeline.as_placed(list(got), reqs, "b", 2, "mine")  # a list: copied one by one
    assert not isinstance(copied, Placements) and copied == list(named)


def test_arrays_are_checked_as_placements_are(placed):
    reqs, got = placed
    pipeline.check_placements("balanced", reqs, got)
    plain = next(i for i in range(len(got)) if i not in got.replaced and not got.table.components[i])
    count = np.diff(got.offsets)
    count[plain] = 0  # one file on no OST
    offsets = np.concatenate([[0], np.cumsum(count)])
    osts = np.concatenate([got.osts[got.offsets[i]:got.offsets[i] + count[i]] for i in range(len(got))])
    empty = Placements(reqs, got.table, osts, offsets, "balanced", got.replaced)
    with pytest.raises(AllocationError, match=f"gave {reqs[plain].path} no OSTs"):
        pipeline.check_placements("balanced", reqs, empty)
    twice = reqs[:-1] + [reqs[0]]
    with pytest.raises(AllocationError, match="repeated 1"):
        pipeline.check_placements("balanced", twice, Placements(twice, got.table, got.osts, got.offsets, "balanced"))


def test_the_plan_from_arrays_is_the_plan_from_objects(placed, tmp_path):
    reqs, got = placed
    cluster = make_cluster()
    with Database(f"sqlite:///{tmp_path}/db.sqlite") as db, db.begin() as tx:
        tx.add_trace("b", reqs[:1])
        text = pipeline.plan_text(tx, "b", 2, "balanced", cluster, got, 0.0)
        assert text == pipeline.plan_text(tx, "b", 2, "balanced", cluster, list(got), 0.0)
        assert text == dumps(pipeline.plan_for(tx, "b", 2, "balanced", cluster, list(got), 0.0))
        assert "EOF/" in text and "o=" in text  # PFL and plain entries both written
