"""IO-Cop's "done when": two real jobs on the emulated cluster, writing files striped over their
OSTs through the Python client, take turns under exclusive and share under ost-aware when their
OSTs are disjoint; and `iez access eval` repeats seed 004's experiments end to end (docs/references.md#s004-fig8)."""

from __future__ import annotations

import json
import subprocess

import pytest

from iez.access.evaluation import Bench, pair
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster


@pytest.fixture
def bench(tmp_path):
    with running_cluster(tmp_path / "emu", make_cluster(3, 5, 10 << 30)) as cd:
        yield Bench(cd, tmp_path, quick=True)


def hold(r, i):
    return r["end_to_end_s"][i] - r["token_wait_s"][i]


def test_two_jobs_take_turns_under_exclusive(bench):
    r = pair(bench, "exclusive", ("0-4", "2-6"))
    assert r["osts_written"] == [[0, 1, 2, 3, 4], [2, 3, 4, 5, 6]]
    assert r["grants"] == [1, 1] and r["hold_overlap_s"] == 0.0 and r["untokened"] == [0, 0]
    # One of them waited for most of the other's run: both start at one instant, but on a loaded
    # machine the later one's start lags by a part of the first's hold (0.21 s of 0.27 s seen in CI);
    # sharing would make it wait nothing at all.
    first, second = sorted((0, 1), key=lambda i: r["token_wait_s"][i])
    assert r["token_wait_s"][second] >= 0.5 * hold(r, first)
    assert r["token_wait_s"][first] < 0.1


def test_two_jobs_share_under_ost_aware_when_their_osts_are_disjoint(bench):
    # The jobs ask at one moment (`pair` holds them at a barrier once set up), so under a policy that
    # shares neither waits and their holds overlap but for the grants' latency, and under one that
    # does not the second waits for the first's whole hold. Compared with the holds themselves (grant
    # to release), not the jobs' runs: those include set-up that a loaded machine stretches.
    r = pair(bench, "ost-aware", ("0-4", "5-9"), declare=True)
    assert r["osts_written"] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert r["grants"] == [1, 1] and r["untokened"] == [0, 0]
    shorter = min(r["held_s"])
    assert max(r["token_wait_s"]) < 0.5 * shorter and r["hold_overlap_s"] >= 0.5 * shorter
    r = pair(bench, "ost-aware", ("0-4", "4-8"), declare=True)  # one OST in common: turns again
    assert r["hold_overlap_s"] == 0.0 and max(r["token_wait_s"]) >= 0.5 * min(r["held_s"])


def test_fine_granularity_passes_the_token_back_and_forth(bench):
    coarse = pair(bench, "exclusive", ("0-7", "0-7"), "coarse")
    fine = pair(bench, "exclusive", ("0-7", "0-7"), "fine")
    assert coarse["handoffs"] == 1 and coarse["grants"] == [1, 1]
    assert fine["grants"] == fine["calls"] == [4, 4]  # a token per write call (docs/references.md#s004-fig8)
    assert fine["handoffs"] >= 5 and fine["hold_overlap_s"] == 0.0


@pytest.mark.slow
def test_iez_access_eval_end_to_end(iez_cmd, tmp_path):
    r = subprocess.run(iez_cmd + ["access", "eval", "-o", str(tmp_path / "out"), "--quick"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "out" / "eval.json").read_text())
    p = res["protocol"]
    assert p["exclusive"]["hold_overlap_s"] == 0 and p["ost_aware_disjoint"]["hold_overlap_s"] > 0
    le = p["lease"]
    assert le["revoked_after_kill_s"] <= le["lease_s"] + 0.05
    assert le["survivor_granted_after_kill_s"] <= le["lease_s"] + 0.1
    # Bursty phases: after the first burst the phases have shifted and nobody waits long.
    waits = p["bursty_phase"]["waits_s"]
    assert max(max(w[1:]) for w in waits) < 0.1 and max(w[0] for w in waits) > 0.1
    cmp = {c["what"]: c["simulated"] for c in res["simulator"]["compare"]}
    assert all(-0.40 < x < -0.20 for x in cmp["write_bw concurrent vs alone"])  # seed: -29.6 %, -30.3 %
    assert all(x < -0.30 for x in cmp["write_bw fine vs alone"])  # seed: -36.6 %, -48.5 %
    assert all(abs(x) < 0.02 for x in cmp["write_bw coarse vs alone"])  # seed: -1.1 %, +7.3 %
    assert all(x < -0.03 for x in cmp["end_to_end bursty, iocop vs uncoordinated"])  # seed: -19.5 %, -10.7 %
    md = (tmp_path / "out" / "eval.md").read_text()
    assert "-29.6%" in md and "| exclusive | exclusive | coarse |" in md
