"""Two-phase collective reads in the simulator (docs/simulator.md, "Collective reads"): the engine's
exchange phase against hand-computed times, ROMIO's and the Lustre-aware cut of a file among
aggregators (iez.sim.collread) against hand-counted bytes, and seed 003's Wolf scenario
(docs/references.md#s003-figs4-5) for its mechanics: how many clients each OST serves, and the
Lustre-aware read's time computed by hand. The paper's ratio is the evaluation (docs/simulator.md,
"Reproductions"), not an oracle here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from iez.errors import ConfigError
from iez.layout.layout import FileLayout, Layout
from iez.sim import engine, study
from iez.sim.collread import _domains, two_phase
from iez.sim.results import parse
from iez.sim.scenario import load_scenario, variants
from iez.sim.workload import Extent

MIB = 1 << 20
REL = 1e-6  # SimGrid's max-min solver works to 1e-5 of a resource's capacity; these cases land closer
ROOT = Path(__file__).resolve().parent.parent


def desc(osts: int, clients: int, read_bw: float, client_bw: float, jobs: list) -> dict:
    """One OSS of 10 GB/s (never the limit) holding `osts` OSTs; `clients` client nodes."""
    return {"format": "iez-sim/1", "jobs": jobs, "platform": {
        "osses": [{"name": "oss0", "nic_bw": 1e10}],
        "osts": [{"index": i, "oss": 0, "read_bw": read_bw, "write_bw": read_bw} for i in range(osts)],
        "clients": [{"name": f"c{k}", "nic_bw": client_bw} for k in range(clients)]}}


def read_job(streams, exchange, nodes):
    return {"name": "j", "nodes": nodes, "phases": [{"kind": "read", "streams": streams, "exchange": exchange}]}


# -- the engine's exchange -------------------------------------------------------------------------

def test_exchange_follows_the_reads_over_the_nics(eng, tmp_path):
    """Two clients read 2 GB each from their own OST at 1 GB/s (2 s), then swap 1 GB each way
    over 2 GB/s NICs, both ways at once (0.5 s): 2.5 s, 0.5 s of it the exchange."""
    d = desc(2, 2, 1e9, 2e9, [read_job([[0, 0, 2e9, -1], [1, 1, 2e9, -1]], [[0, 1, 1e9], [1, 0, 1e9]], [0, 1])])
    r = parse(engine.run(d, tmp_path / "run"))
    ph = r.job("j").phases[0]
    assert ph.end - ph.start == pytest.approx(2.5, rel=REL)
    assert ph.exchange == pytest.approx(0.5, rel=REL)
    assert ph.bytes == 4e9  # the phase's bytes are what the file gave, not what was forwarded


def test_exchange_into_one_node_shares_its_nic(eng, tmp_path):
    """Two senders of 1 GB each into one 2 GB/s receiver: 1 s, the receiving NIC bound; the read
    of 1 GB from an OST at 1 GB/s before it: 2 s in all."""
    d = desc(2, 3, 1e9, 2e9, [read_job([[0, 0, 1e9, -1], [1, 1, 1e9, -1]], [[0, 2, 1e9], [1, 2, 1e9]], [0, 1, 2])])
    ph = parse(engine.run(d, tmp_path / "run")).job("j").phases[0]
    assert ph.exchange == pytest.approx(1.0, rel=REL)
    assert ph.end - ph.start == pytest.approx(2.0, rel=REL)


def test_a_phase_without_exchange_reports_none(eng, tmp_path):
    d = desc(1, 1, 1e9, 2e9, [{"name": "j", "nodes": [0], "phases": [{"kind": "read", "streams": [[0, 0, 1e9, -1]]}]}])
    doc = engine.run(d, tmp_path / "run")
    assert "exchange" not in doc["jobs"][0]["phases"][0]
    assert parse(doc).job("j").phases[0].exchange == 0.0


@pytest.mark.parametrize("phase,message", [
    ({"kind": "write", "streams": [[0, 0, 1, -1]], "exchange": [[0, 1, 1]]}, "only a read phase has an exchange"),
    ({"kind": "read", "streams": [], "exchange": [[0, 2, 1]]}, "node 2 is not a position in the job's nodes"),
    ({"kind": "read", "streams": [], "exchange": [[1, 1, 1]]}, "sends nothing to itself"),
    ({"kind": "read", "streams": [], "exchange": [[0, 1]]}, "expected [from node, to node, bytes]"),
    ({"kind": "read", "streams": [], "exchange": [[0, 1, -5]]}, "must be >= 0"),
])
def test_bad_exchanges_are_one_line_errors(eng, tmp_path, phase, message):
    d = desc(1, 2, 1e9, 2e9, [{"name": "j", "nodes": [0, 1], "phases": [phase]}])
    (tmp_path / "d.json").write_text(json.dumps(d))
    proc = subprocess.run([eng, str(tmp_path / "d.json")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.strip().count("\n") == 0


# -- ROMIO's and the Lustre-aware cut ------------------------------------------------------------------

PATH = "/f"


def interleaved(ranks: int, segments: int, block: int) -> list[Extent]:
    return [Extent(r, PATH, (s * ranks + r) * block, block) for s in range(segments) for r in range(ranks)]


def by_ost(reads, lay):
    out: dict[tuple[int, int], int] = {}
    for (node, _, c, s), n in reads.items():
        key = (node, lay.parts()[c].layout.osts[s])
        out[key] = out.get(key, 0) + n
    return out


def test_romio_domains_span_every_ost_and_lustre_reads_one_ost_each():
    """4 ranks on 2 nodes, IOR interleaved with 1 MiB blocks, 2 segments, over OSTs 7 and 9 in
    1 MiB stripes: block i is rank i % 4's (node (i % 4) // 2) and sits on OST [7, 9][i % 2].
    ROMIO: node 0 reads [0, 4 MiB) (blocks 0-3), node 1 [4, 8 MiB): each reads 2 MiB from each OST
    and sends the other node its 2 blocks. Lustre-aware: aggregators are ranks 0 (node 0) and 2
    (node 1) in turn; node 0 reads OST 7 (blocks 0, 2, 4, 6), node 1 OST 9, and blocks 2 and 6
    (rank 2's), 1 and 5 (rank 1's) cross."""
    lay = FileLayout.of(Layout(stripe_size=MIB, stripe_count=2, osts=(7, 9)))
    ext = interleaved(4, 2, MIB)
    node_of = lambda r: r // 2  # noqa: E731
    romio = two_phase("romio", ext, {PATH: lay}, node_of)
    assert by_ost(romio.reads, lay) == {(0, 7): 2 * MIB, (0, 9): 2 * MIB, (1, 7): 2 * MIB, (1, 9): 2 * MIB}
    assert romio.exchange == {(0, 1): 2 * MIB, (1, 0): 2 * MIB}
    aware = two_phase("lustre", ext, {PATH: lay}, node_of)
    assert by_ost(aware.reads, lay) == {(0, 7): 4 * MIB, (1, 9): 4 * MIB}
    assert aware.exchange == {(0, 1): 2 * MIB, (1, 0): 2 * MIB}


def test_lustre_with_fewer_ranks_than_osts_gives_each_aggregator_every_kth_ost():
    """2 ranks, one a node, 4 OSTs: aggregator a reads OSTs a and a + 2 (libiez's collread.c).
    Block i is rank i % 2's and on OST i % 4, read by node (i % 4) % 2 = i % 2: its owner's."""
    lay = FileLayout.of(Layout(stripe_size=MIB, stripe_count=4, osts=(0, 1, 2, 3)))
    aware = two_phase("lustre", interleaved(2, 4, MIB), {PATH: lay}, lambda r: r)
    assert by_ost(aware.reads, lay) == {(0, 0): 2 * MIB, (1, 1): 2 * MIB, (0, 2): 2 * MIB, (1, 3): 2 * MIB}
    assert aware.exchange == {}


@pytest.mark.parametrize("mode", ["romio", "lustre"])
def test_a_file_read_by_one_node_is_read_there_and_sent_nowhere(mode):
    """File per process: each collective call is on one rank's file, so its node is the only
    aggregator and reads every OST of it, as an independent read would."""
    lay = FileLayout.of(Layout(stripe_size=MIB, stripe_count=3, osts=(4, 5, 6)))
    ext = [Extent(r, f"/f{r}", 0, 5 * MIB) for r in range(4)]
    tp = two_phase(mode, ext, {f"/f{r}": lay for r in range(4)}, lambda r: r // 2)
    assert tp.exchange == {}
    assert tp.reads == {(r // 2, f"/f{r}", 0, s): n for r in range(4) for s, n in enumerate((2 * MIB, 2 * MIB, MIB))}


def test_romio_domain_ends_sit_on_the_nearest_stripe_boundary():
    # 10 MiB in 3 domains: 3.33 and 6.67 MiB, moved to 4 and 8 MiB (4 MiB stripes)
    assert _domains(0, 10 * MIB, 3, 4 * MIB) == [4 * MIB, 8 * MIB]
    # 5 MiB in 4: 1.25, 2.5 and 3.75 MiB go to 0, 4 and 4 MiB (ties up, as ROMIO's rem_front <
    # rem_back): domains 0 and 2 are empty, never past the range's end
    assert _domains(0, 5 * MIB, 4, 4 * MIB) == [0, 4 * MIB, 4 * MIB]
    assert _domains(MIB, 9 * MIB, 2, 2 * MIB) == [6 * MIB]  # 5 MiB is a tie: up to 6


def test_an_unknown_collective_read_is_refused():
    with pytest.raises(ConfigError, match="collective_read 'two-phase' is not one of off, romio, lustre"):
        two_phase("two-phase", [], {}, lambda r: r)


# -- seed 003 on Wolf --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def wolf(tmp_path_factory):
    doc, base = load_scenario(ROOT / "scenarios" / "seed003-collread.toml")
    out = tmp_path_factory.mktemp("wolf")
    return {v.label: study.simulate(v, out / v.label) for v in variants(doc, base)}


def test_wolf_romio_serves_every_client_on_every_ost_and_lustre_one(eng, wolf):
    """Fig. 4 against Fig. 5: each OST's most concurrent clients."""
    for label, clients in (("romio", 6), ("lustre", 1)):
        osts = wolf[label].results.osts
        assert len(osts) == 4
        assert {max(n for _, n in o.streams) for o in osts} == {clients}, label
        assert {o.bytes_read for o in osts} == {3 * (1 << 30)}, label


def test_wolf_lustre_aware_read_takes_the_hand_computed_time(eng, wolf):
    """12 GiB over 4 OSTs of 778 MB/s, one client each (f = 1), then each of the 4 aggregators sends
    5/6 of its 3 GiB over a 4 GB/s link; before it, 192 opens at 40,000 a second."""
    d = 12 * (1 << 30)
    ph = wolf["lustre"].results.job("ior").phases[0]
    assert ph.exchange == pytest.approx(d / 4 * 5 / 6 / 4e9, rel=REL)
    assert ph.end - ph.start == pytest.approx(192 / 40000 + d / (4 * 778e6) + d / 4 * 5 / 6 / 4e9, rel=REL)


def test_wolf_exchanges_what_each_aggregator_holds_for_other_nodes(eng, wolf):
    """Node n's ranks own blocks 32n to 32n + 31 of every 192. Lustre-aware: an OST's stripes are
    every 4th block, spread evenly over the nodes, so 5/6 cross. ROMIO: a domain is 512 blocks, two
    whole segments (32 of its node's in each) and pieces of others (32 more): 416 of 512 cross."""
    d = 12 * (1 << 30)
    for label, crossing in (("romio", d * 416 // 512), ("lustre", d * 5 // 6)):
        ph = wolf[label].description["jobs"][0]["phases"][0]
        assert sum(n for _, _, n in ph["exchange"]) == crossing, label
