"""The Python side of `iez sim`: scenario parsing, workloads, the RAID-0 mapping into streams,
traces, and the command end to end (real engine, small cluster)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, ROOT
from iez.errors import ConfigError
from iez.layout.layout import FileLayout, Layout
from iez.layout.raid0 import bytes_per_ost
from iez.layout.raid0 import range_bytes
from iez.sim.scenario import load_scenario, parse_rate, variants
from iez.sim.study import compare, simulate, workloads
from iez.sim.trace import workload_from_records
from iez.sim.kinds import KINDS, build
from iez.sim.workload import Pattern
from iez.trace.record import FileRecord
from iez.units import parse_duration

MIB = 1 << 20


def test_rates_and_durations():
    assert parse_rate("10Gbit/s", "x") == 1.25e9
    assert parse_rate("500MiB/s", "x") == 500 * MIB
    assert parse_rate(2e9, "x") == 2e9
    assert parse_duration("200us", "x") == pytest.approx(2e-4)
    assert parse_duration("2min", "x") == 120
    assert parse_duration("7d", "--reservation-ttl") == 7 * 86400
    with pytest.raises(ConfigError, match="bandwidth"):
        parse_rate("fast", "sim.client_nic_bw")
    with pytest.raises(ConfigError, match=">= 0"):
        parse_duration(-1, "x")


def test_ior_fpp_and_ssf_extents():
    fpp = build(Pattern("j", ranks=4, block=8 * MIB, transfer=MIB, read=True))
    assert len(fpp.files) == 4 and [p.kind for p in fpp.phases] == ["write", "read"]
    assert fpp.phases[0].calls == 8 and fpp.phases[0].creates == tuple((r, 1) for r in range(4))
    ssf = build(Pattern("j", ranks=4, mode="ssf", block=8 * MIB, transfer=MIB, segments=2))
    assert len(ssf.files) == 1 and ssf.files[0].size == 64 * MIB
    offsets = sorted(e.offset for e in ssf.phases[0].extents)
    assert offsets == [k * 8 * MIB for k in range(8)]
    assert ssf.phases[0].creates == ((0, 1),) and len(ssf.phases[0].opens) == 3


def test_hacc_bt_tile_and_bursts():
    hacc = build(Pattern("h", kind="hacc-io", ranks=2, particles=1000))
    assert hacc.files[0].size == 38000 and hacc.phases[0].calls == 9
    bt = build(Pattern("b", kind="bt-io", ranks=4, ranks_per_node=2, bt_class="A", compute=1.0))
    writes = [p for p in bt.phases if p.kind == "write"]
    assert len(writes) == 40 and all(len(p.extents) == 2 for p in writes)
    assert sum(e.length for p in writes for e in p.extents) == bt.files[0].size
    tile = build(Pattern("t", kind="mpi-tile-io", ranks=4, tile=(8, 4), element=2, collective=False))
    ext = tile.phases[0].extents
    assert sum(e.length for e in ext) == tile.files[0].size and len({e.offset for e in ext}) == len(ext)
    bursty = build(Pattern("i", ranks=1, block=MIB, bursts=3, compute=30.0, compute_after=True))
    assert [p.kind for p in bursty.phases] == ["write", "compute"] * 3
    assert bursty.phases[2].creates == () and bursty.phases[2].opens == ((0, 1),)


def test_range_bytes_agrees_with_the_raid0_mapping():
    lay = FileLayout(plain=Layout(stripe_size=MIB, osts=(3, 5, 7)))
    size = 10 * MIB + 12345
    per = range_bytes(lay, 0, size)
    by_ost: dict[int, int] = {}
    for (_c, s), n in per.items():
        by_ost[lay.plain.osts[s]] = by_ost.get(lay.plain.osts[s], 0) + n
    assert by_ost == bytes_per_ost(lay, size)
    parts = [range_bytes(lay, a, b) for a, b in ((0, 3 * MIB + 7), (3 * MIB + 7, size))]
    assert {k: parts[0].get(k, 0) + parts[1].get(k, 0) for k in per} == per


def test_trace_records_become_one_write_phase_per_layer_kept_once():
    recs = [FileRecord(path="/l/f", rank=r, host=f"n{r // 2}", api=api, created=r == 0, bytes_written=MIB,
                       max_offset=(r + 1) * MIB, stripe_count=2, stripe_size=MIB, osts=(1, 2))
            for r in range(4) for api in ("posix", "mpiio")]
    wl = workload_from_records(recs, "app")
    assert wl.nodes == 2 and wl.files[0].osts == (1, 2)
    (ph,) = wl.phases
    assert sum(e.length for e in ph.extents) == 4 * MIB and ph.creates == ((0, 1),)


# -- the kinds of job ---------------------------------------------------------------------------------

def libiez_trace(tmp_path: Path) -> Path:
    """A libiez trace directory: one real process writing one file under LD_PRELOAD."""
    lib = BUILD / "libiez" / "libiez.so"
    if not lib.exists():
        pytest.fail(f"{lib} is missing: build libiez (cmake -S . -B build && cmake --build build)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
    env.update(LD_PRELOAD=str(lib), IEZ_TRACE_DIR=str(tmp_path / "traces"), IEZ_APP="simtest", IEZ_RUN="1")
    subprocess.run([sys.executable, "-B", "-c", "open('out.dat', 'wb').write(b'z' * 4096)"], env=env,
                   cwd=tmp_path, check=True, timeout=60)
    return tmp_path / "traces"


def darshan_log(tmp_path: Path) -> Path:
    from darshan.log_utils import get_log_path
    return Path(get_log_path("sample-goodost.darshan"))  # a 48-process IOR, FPP


RECORDED_INPUTS = {"trace": libiez_trace, "darshan": darshan_log}  # a recorded kind's test input


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_builds_from_a_minimal_job(kind, tmp_path):
    job = {"name": "j", "kind": kind}
    if KINDS[kind].recorded:
        job["path"] = str(RECORDED_INPUTS[kind](tmp_path))
    (v,) = variants({"job": [job]}, tmp_path)
    (wl,) = workloads(v.scenario)
    assert wl.name == "j" and wl.files and any(ph.extents or ph.creates for ph in wl.phases)  # data, or mpi-open's create
    assert v.scenario.jobs[0].placement == ("observed" if KINDS[kind].recorded else "rr")


def test_an_unknown_kind_is_one_line_naming_every_kind(tmp_path):
    with pytest.raises(ConfigError) as e:
        variants({"job": [{"name": "j", "kind": "iox"}]}, tmp_path)
    assert str(e.value) == f"job j: kind 'iox' is not one of {', '.join(KINDS)}"
    with pytest.raises(ConfigError, match="kind 'iox' is not one of ior, "):
        build(Pattern("j", kind="iox"))
    for kind in (k for k, row in KINDS.items() if row.recorded):
        with pytest.raises(ConfigError, match=f"a {kind} job needs path"):
            variants({"job": [{"name": "j", "kind": kind}]}, tmp_path)


def test_the_simulator_docs_name_every_kind():
    text = (ROOT / "docs" / "simulator.md").read_text()
    (listed,) = re.findall(r"`kind` ([a-z0-9|-]+)", text)
    assert listed.split("|") == list(KINDS)


def test_sweeps_variants_and_bad_keys(tmp_path):
    doc = {"job": [{"name": "a", "ranks": 2}, {"name": "b", "ranks": 2}],
           "sweep": {"a.ranks": [2, 4]}, "variant": [{"name": "solo", "jobs": ["a"]}, {"name": "both"}]}
    vs = variants(doc, tmp_path)
    assert [v.label for v in vs] == ["solo,a.ranks=2", "solo,a.ranks=4", "both,a.ranks=2", "both,a.ranks=4"]
    assert [len(v.scenario.jobs) for v in vs] == [1, 1, 2, 2]
    assert vs[1].scenario.jobs[0].pattern.ranks == 4
    with pytest.raises(ConfigError, match="no job named"):
        variants({"job": [{"name": "a"}], "sweep": {"zz.ranks": [1]}}, tmp_path)
    with pytest.raises(ConfigError, match="unknown keys"):
        variants({"job": [{"name": "a", "blok": 1}]}, tmp_path)


SCENARIO = """
title = "two nodes, list placement"
[sim]
client_nic_bw = "10Gbit/s"
[[job]]
name = "ior"
ranks = 4
nodes = 2
block = "64MiB"
stripe_count = 1
placement = "list"
osts = [0, 5, 10, 1]
read = true
[sweep]
"sim.contention" = [[[1, 1.0]], [[1, 1.0], [2, 0.5]]]
[figure]
x = "run"
metrics = ["write_bw", "read_bw"]
"""


def test_iez_sim_end_to_end(tmp_path, iez_cmd):
    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO)
    out = tmp_path / "out"
    proc = subprocess.run(iez_cmd + ["sim", str(sc), "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (out / "figure.png").stat().st_size > 0
    plain, slowed = summary["runs"]
    # 4 files of 64 MiB on 4 different OSTs (default 400 MB/s each), after 4 creates at the
    # default 20,000/s on the MDS.
    write_time = 4 / 20000 + 64 * MIB / 4e8
    assert plain["jobs"][0]["write_bw"] == pytest.approx(4 * 64 * MIB / write_time, rel=1e-6)
    assert plain["makespan"] >= plain["lower_bound"] * (1 - 1e-9)
    # One stream per OST never reaches the second point of the table: no change.
    assert slowed["jobs"][0]["write_bw"] == pytest.approx(plain["jobs"][0]["write_bw"], rel=1e-9)
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    assert (run_dir / "osts.png").exists() and (run_dir / "results.json").exists()


def test_iez_sim_bad_scenario_is_one_line(tmp_path, iez_cmd):
    sc = tmp_path / "s.toml"
    sc.write_text('[[job]]\nname = "a"\nkind = "nope"\n')
    proc = subprocess.run(iez_cmd + ["sim", str(sc), "-o", str(tmp_path / "o")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "kind 'nope'" in proc.stderr


def test_every_reproduction_scenario_parses():
    paths = sorted((ROOT / "scenarios").glob("*.toml"))
    runs = 0
    for p in paths:
        doc, base = load_scenario(p)
        if "job" in doc:  # cluster files sit beside the scenarios
            runs += len(variants(doc, base))
    # seed004_fig4, seed004-iocop, seed000-fig10, seed001-fig3, seed001-fig6, -fig7, -fig8, -subset at least
    assert runs >= 4 + 4 + 9 + 7 + 8 + 8 + 4 + 6


def test_seed004_fig4_phase_shifting(tmp_path):
    """docs/references.md#s004-figs3-4: two bursty IORs lose to interference when their I/O phases meet; a start
    delayed by one I/O phase, or IO-Cop's per-phase token, shifts the phases apart."""
    doc, base = load_scenario(ROOT / "scenarios" / "seed004_fig4.toml")
    vs = variants(doc, base)
    runs = {v.label: simulate(v, tmp_path / v.label) for v in vs}
    assert set(runs) == {"alone", "uncoordinated", "delayed", "iocop"}
    for r in runs.values():
        assert r.results.makespan >= r.bound * (1 - 1e-9)
    e2e = {(k, j.name): j.end_to_end for k, r in runs.items() for j in r.results.jobs}
    alone = e2e[("alone", "Instance0")]
    io_alone = (alone - 4 * 30) / 4  # the delay the scenario uses is one such phase
    assert io_alone == pytest.approx(24.6, abs=0.1)
    # Together, every I/O phase is slower: both instances lose the same.
    assert e2e[("uncoordinated", "Instance1")] == pytest.approx(e2e[("uncoordinated", "Instance2")], rel=1e-6)
    assert e2e[("uncoordinated", "Instance1")] > alone * 1.1
    # Shifted by hand or by the token, Instance1 runs as if alone and Instance2 as if alone plus
    # the shift (waiting for the window, or for the token).
    for k in ("delayed", "iocop"):
        assert e2e[(k, "Instance1")] == pytest.approx(alone, rel=0.002)
        assert e2e[(k, "Instance2")] == pytest.approx(alone + io_alone, rel=0.002)
    waits = {j.name: j.token_wait for j in runs["iocop"].results.jobs}
    assert waits["Instance2"] == pytest.approx(io_alone, rel=0.01) and waits["Instance1"] < 0.1
    # Comparisons across jobs: Instance2 (delayed) against Instance0 (alone).
    scn = vs[0].scenario
    (cross,) = [compare(c, list(runs.values())) for c in scn.compares if c.base.get("job") == "Instance0"]
    (pair,) = cross["pairs"]
    assert pair["job"] == "Instance2 vs Instance0"
    assert pair["change"] == pytest.approx(io_alone / alone, rel=0.01)
