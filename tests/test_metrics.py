import pytest

from iez.cluster import make_cluster
from iez.metrics import balance_report, integer_bound, ost_cost, oss_utilization, ost_utilization

GiB = 1 << 30


def test_ost_cost_definition():
    # docs/references.md#s000-figs7-9: max 75%, mean 51.06% -> 1.47
    assert ost_cost({0: 0.75, 1: 0.2712}) == pytest.approx(0.75 / ((0.75 + 0.2712) / 2))
    assert ost_cost({0: 0.0, 1: 0.0}) == 1.0
    assert ost_cost({0: 0.5, 1: 0.5, 2: 0.5}) == 1.0


def test_integer_bound():
    assert integer_bound(512, 15) == pytest.approx(35 / (512 / 15))
    assert round(integer_bound(512, 15), 3) == 1.025
    assert integer_bound(30, 15) == 1.0
    assert integer_bound(32, 15) == pytest.approx(3 / (32 / 15))


def test_utilizations_and_report():
    c = make_cluster(n_oss=3, osts_per_oss=5, ost_size=10 * GiB)
    job = {0: 5 * GiB, 1: 5 * GiB}
    ou = ost_utilization(c, job)
    assert ou[0] == 0.5 and ou[14] == 0.0
    su = oss_utilization(c, job)
    assert su == {"oss0": pytest.approx(0.2), "oss1": 0.0, "oss2": 0.0}
    c2 = c.with_used({i: 5 * GiB for i in range(2, 15)})
    r = balance_report(c2, job)
    assert r.job.ost_cost == pytest.approx(0.5 / (1.0 / 15))
    assert r.total.ost_cost == pytest.approx(1.0)  # job filled the two empty OSTs to the level
    assert r.total.oss_cost == pytest.approx(1.0)
