"""The policy comparison of `iez report` as plain data (report/balance.py)."""

import dataclasses

import pytest

from iez.cluster import Snapshot, make_cluster
from iez.errors import IezError
from iez.layout.layout import FileLayout, Layout
from iez.report.balance import check_one_cluster, cluster_used, policy_balance, report_json, report_rows
from iez.request import Placement

MIB = 1 << 20


def test_cluster_used_reads_the_snapshot():
    cluster = make_cluster(2, 2, ost_size=1 << 30)
    snap = Snapshot.from_cluster(cluster)
    # 256 MiB free on OST 1 (kbytesfree wins over kbytesavail); OST 3 reports more than it holds.
    snap = snap.with_ost(dataclasses.replace(snap.osts[1], kbytesfree=256 * 1024, kbytesavail=0))
    snap = snap.with_ost(dataclasses.replace(snap.osts[3], kbytestotal=4 << 20, kbytesfree=None, kbytesavail=0))
    used = cluster_used(cluster, snap)
    assert [o.used for o in used.osts] == [0, 768 * MIB, 0, 1 << 30]


def test_policy_balance_rows_and_json():
    cluster = make_cluster(2, 2, ost_size=1 << 30)
    snap = Snapshot.from_cluster(cluster)
    placed = [Placement("/a", FileLayout(Layout(MIB, 2, osts=(0, 2))), 4 * MIB),
              Placement("/b", FileLayout(Layout(MIB, 1, osts=(1,))), 2 * MIB)]
    row = policy_balance("balanced", cluster, snap, placed)
    assert (row.files, row.stripes, row.job_bytes) == (2, 3, {0: 2 * MIB, 2: 2 * MIB, 1: 2 * MIB})
    assert row.balance.job.ost_cost == pytest.approx(4 / 3)
    rows = dict(report_rows([row]))
    assert rows["files / stripes"] == ["2 / 3"] and rows["OSTs used"] == ["3 of 4"]
    data = report_json("ior", 3, [row])
    assert (data["app"], data["run"], data["policies"]["balanced"]["stripes"]) == ("ior", 3, 3)
    check_one_cluster("ior", 3, [row, dataclasses.replace(row, policy="rr")])
    other = dataclasses.replace(row, policy="rr", cluster=make_cluster(1, 4, ost_size=1 << 30, fsname="other"))
    with pytest.raises(IezError, match="run 3 of ior was placed on different clusters"):
        check_one_cluster("ior", 3, [row, other])
