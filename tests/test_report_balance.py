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


def test_changed_layouts_say_what_was_asked_chosen_and_why():
    from iez.layout.layout import LUSTRE_EOF, Component
    from iez.report.balance import changed_rows, layout_summary

    cluster = make_cluster(2, 2, ost_size=1 << 30)
    snap = Snapshot.from_cluster(cluster)
    pfl = FileLayout(components=(Component(0, 4 * MIB, Layout(MIB, 1, osts=(0,))),
                                 Component(4 * MIB, LUSTRE_EOF, Layout(MIB, 4, osts=(1, 2, 3, 0)))))
    placed = [Placement("/wide", FileLayout(Layout(4 * MIB, 4, osts=(0, 1, 2, 3))), 64 * MIB, note="auto: why"),
              Placement("/kept", FileLayout(Layout(MIB, 1, osts=(1,))), MIB),
              Placement("/grows", pfl, 0, note="size not known")]
    row = policy_balance("balanced", cluster, snap, placed, {"/wide": 1, "/kept": 1})
    assert [(c.path, c.asked, c.chosen, c.why) for c in row.changed] == [
        ("/wide", "1 stripe", "4 x 4.0M", "auto: why"), ("/grows", "-", "PFL 1 / 4", "size not known")]
    assert layout_summary(pfl) == "PFL 1 / 4" and dict(report_rows([row]))["layouts iez changed"] == ["2 of 3"]
    assert changed_rows([row]) == [["balanced", "/wide", "1 stripe", "4 x 4.0M", "auto: why"],
                                   ["balanced", "/grows", "-", "PFL 1 / 4", "size not known"]]
    assert changed_rows([row], 1)[1] == ["balanced", "... and 1 more", "", "", ""]
    assert report_json("ior", 3, [row])["policies"]["balanced"]["changed"][0] == {
        "path": "/wide", "asked": "1 stripe", "chosen": "4 x 4.0M", "why": "auto: why"}
    kept = policy_balance("rr", cluster, snap, placed[1:2])
    assert kept.changed == () and changed_rows([kept]) == []
