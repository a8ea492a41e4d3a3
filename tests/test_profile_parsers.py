"""LIOPProf parsers: rpctrace (the C parser through ctypes and its ASan build), iostat, exports
samples, and every brw_stats / stats fixture through the profile's tables."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import BUILD, FIXTURES, need_fixtures, need_tool

from iez.cluster import make_cluster
from iez.layout.layout import Layout
from iez.lustre.brw_stats import parse_brw_stats
from iez.lustre.getparam import parse_getparam
from iez.lustre.params import ParamTree
from iez.lustre.stats import format_stats, parse_stats
from iez.profile import analysis
from iez.profile.emulate import STYLES, debug_log_lines, emulate_rpcs
from iez.profile.ioevents import IoEvent
from iez.profile.iostat import parse_iostat
from iez.profile.profiledir import ProfileMeta, format_sample, parse_samples
from iez.profile.report import Profile, brw_rows, stats_rows
from iez.profile.rpctrace import HANDLED, HANDLING, RpcTraceReader, read_all

MiB = 1 << 20

# LIOPProf's Fig. 2 example (docs/references.md#s003-fig2), which the paper wraps over three lines
# for print; a real log has it on one.
SEED = ("00000100:00100000:27.0:1458939850.660586:0:16998:0:(service.c:2071:ptlrpc_server_handle_request()) "
        "Handling RPC pname:cluuid+ref:pid:xid:nid:opc "
        "ll_ost_io05_000:f2c9a9e1-3fbb-9182-59db-ca8c14b411d7+7:8424:x1529178798258480:12345-192.168.1.38@o2ib:3")
# docs/references.md#l-fmt-rpctrace: the 2.13+ shape (from the format string) and a real 1.8/2.0-era pair.
NEW = ("00000100:00100000:3.0:1716912345.{t}:0:24117:0:(service.c:{line}:ptlrpc_server_handle_request()) "
       "{what} RPC req@00000000a1b2c3d4 pname:cluuid+ref:pid:xid:nid:opc:job ll_ost_io01_003:"
       "8c9a7e51-1d2b-4f3a-9c7d-0e2f4a6b8c10+9:40211:x1799000000123456:12345-10.0.0.21@o2ib:4:ior.1000")
OLD_HANDLED = ("00000100:00100000:2.0:1307742632.950439:0:23114:0:(service.c:1752:ptlrpc_server_handle_request()) "
               "Handled RPC pname:cluuid+ref:pid:xid:nid:opc ll_ost_io_126:30dc3ffd-9567-deb3-c9ed-423e4589e173+6:"
               "21865:x1371266995979156:12345-0@lo:10")


def parse_text(tmp_path: Path, text: str, name: str = "log"):
    p = tmp_path / name
    p.write_text(text)
    recs, strings, counts = read_all(p)
    return recs, strings, counts


def test_seed_example_line(tmp_path):
    recs, s, c = parse_text(tmp_path, SEED + "\n")
    assert (c.lines, c.rpc, c.other, c.malformed) == (1, 1, 0, 0)
    r = recs[0]
    assert r["kind"] == HANDLING and r["cpu"] == 27 and r["thread"] == 16998
    assert r["t_us"] == 1458939850660586
    assert s[r["pname"]] == "ll_ost_io05_000"
    assert s[r["uuid"]] == "f2c9a9e1-3fbb-9182-59db-ca8c14b411d7" and r["ref"] == 7
    assert r["client_pid"] == 8424 and r["xid"] == 1529178798258480
    assert s[r["nid"]] == "12345-192.168.1.38@o2ib" and analysis.client_of(s[r["nid"]]) == "192.168.1.38@o2ib"
    assert r["opc"] == 3 and r["job"] == 0 and r["proc_us"] == -1


def test_213_pair_and_old_forms(tmp_path):
    text = "\n".join([
        NEW.format(t="123456", line=2335, what="Handling"),
        NEW.format(t="125901", line=2378, what="Handled") + " Request processed in 2445us (2611us total) trans 0 rc 0/0",
        OLD_HANDLED,  # quoted without the timing suffix
        OLD_HANDLED.replace("+6:", "+-99:").replace("30dc3ffd-9567-deb3-c9ed-423e4589e173", "0")
        + " Request procesed in 12us (40us total) trans 77 rc -2/-999",  # 2.5-2.10 spelling, no export
        "00000001:00000001:2.0F:1307742632.950439:0:23114:0:(foo.c:1:bar()) some other message",
    ]) + "\n"
    recs, s, c = parse_text(tmp_path, text)
    assert (c.rpc, c.other, c.malformed) == (4, 1, 0)
    a, b, old, oldest = recs
    assert (a["kind"], b["kind"]) == (HANDLING, HANDLED) and a["style"] == b["style"] == 1
    assert s[a["job"]] == s[b["job"]] == "ior.1000" and a["opc"] == 4
    assert (b["proc_us"], b["total_us"], b["t_us"] - a["t_us"]) == (2445, 2611, 2445)
    assert old["style"] == 0 and old["proc_us"] == -1 and s[old["nid"]] == "12345-0@lo" and old["opc"] == 10
    assert (oldest["proc_us"], oldest["total_us"], oldest["transno"], oldest["rc"], oldest["status"]) == (12, 40, 77, -2, -999)
    assert s[oldest["uuid"]] == "0" and oldest["ref"] == -99


def test_ipv6_nid_and_job_with_colons(tmp_path):
    line = NEW.format(t="1", line=1, what="Handling").replace("12345-10.0.0.21@o2ib", "12345-fe80::1@tcp3")
    line = line.replace(":ior.1000", ":slurm:42 x")
    recs, s, c = parse_text(tmp_path, line + "\n")
    assert c.rpc == 1 and s[recs[0]["nid"]] == "12345-fe80::1@tcp3" and s[recs[0]["job"]] == "slurm:42 x"
    assert recs[0]["t_us"] == 1716912345100000  # a short fraction is a fraction, not microseconds


def _emulated_rpcs():
    cluster = make_cluster(2, 2, 1 << 40, "t")
    lay = Layout(stripe_size=MiB, osts=(0, 2, 1, 3))
    events = [IoEvent(100.0 + k * 0.01, op, "/f", (k * 3 + c) * MiB + 4096, MiB, f"10.1.0.{c}@tcp", 50 + c, f"j{c}")
              for k in range(6) for c in range(3) for op in ("write", "read")]
    return emulate_rpcs(events, {"/f": lay}, cluster)


@pytest.mark.parametrize("style", STYLES)
def test_emulated_lines_round_trip(tmp_path, style):
    rpcs = _emulated_rpcs()
    assert {r.opc for r in rpcs} >= {3, 4, 101, 103}
    text = "".join(line + "\n" for line in debug_log_lines(rpcs, style))
    recs, s, c = parse_text(tmp_path, text)
    assert (c.rpc, c.malformed, c.other) == (2 * len(rpcs), 0, 0)
    got = {(int(r["xid"]), analysis.client_of(s[r["nid"]]), int(r["kind"])): r for r in recs}
    for rpc in rpcs:
        start, end = got[(rpc.xid, rpc.nid, HANDLING)], got[(rpc.xid, rpc.nid, HANDLED)]
        assert start["opc"] == end["opc"] == rpc.opc and s[start["pname"]] == rpc.thread
        assert start["t_us"] == round(rpc.start * 1e6) and end["t_us"] == round(rpc.end * 1e6)
        assert end["proc_us"] == round((rpc.end - rpc.start) * 1e6)
        assert s[end["job"]] == (rpc.jobid if style == "2.13" else "")


def test_chunking_does_not_change_records(tmp_path):
    text = "".join(line + "\n" for line in debug_log_lines(_emulated_rpcs()))
    p = tmp_path / "log"
    p.write_bytes(text.encode())
    whole, strings, _ = read_all(p)
    for size in (1, 7, 333, 4096):
        with RpcTraceReader() as r, open(p, "rb") as f:
            parts = np.concatenate(list(r.chunks(f, size)))
            assert [r.strings[i] for i in parts["nid"]] == [strings[i] for i in whole["nid"]]
            assert np.array_equal(parts[["t_us", "xid", "opc", "kind", "proc_us"]], whole[["t_us", "xid", "opc", "kind", "proc_us"]])


def _fuzz_lines(rng: random.Random) -> list[str]:
    base = [SEED, NEW.format(t="125901", line=2378, what="Handled") + " Request processed in 2445us (2611us total) trans 0 rc 0/0",
            OLD_HANDLED]
    out = []
    for line in base:
        out += [line[:n] for n in range(0, len(line), 3)]  # every truncation
    for _ in range(400):
        line = list(rng.choice(base))
        for _ in range(rng.randint(1, 4)):
            line[rng.randrange(len(line))] = rng.choice(":+x@ -.0123456789()\x00\xff")
        out.append("".join(line))
    out += ["".join(chr(rng.randrange(1, 256)) for _ in range(rng.randint(1, 300))).replace("\n", " ") for _ in range(200)]
    return out


def test_fuzz_random_and_truncated_lines(tmp_path):
    lines = _fuzz_lines(random.Random(7))
    recs, s, c = parse_text(tmp_path, "\n".join(lines) + "\n")
    blank = sum(1 for line in lines if not line.strip(" \t\r"))
    assert c.lines == len(lines) and c.rpc + c.other + c.malformed + blank == c.lines
    assert c.malformed > 300 and len(c.examples) == 16
    assert len(recs) == c.rpc and all(0 <= i < len(s) for f in ("pname", "uuid", "nid", "job") for i in recs[f])
    assert set(recs["kind"].tolist()) <= {HANDLING, HANDLED}
    # a line cut inside its values parses only where the cut cannot be seen (in the job id, the
    # net name or the last opcode digits); the seed line cut anywhere before the NID never does
    cut = [line for line in lines if SEED.startswith(line) and len(line) < SEED.index("12345-")]
    assert cut and not any(int(r["line"]) - 1 < len(cut) for r in recs)


def test_fuzz_under_asan(tmp_path):
    exe = BUILD / "liopprof" / "liopprof-rpctrace-asan"
    if not exe.exists():
        pytest.fail(f"{exe} is not built: cmake -S . -B build && cmake --build build")
    p = tmp_path / "fuzz.log"
    p.write_bytes(("\n".join(_fuzz_lines(random.Random(11))) + "\n").encode("utf-8", "surrogateescape")
                  + b"\x00\xff" * 5000 + SEED[:50].encode())  # a long binary tail with no newline
    run = subprocess.run([str(exe), str(p)], capture_output=True, text=True, errors="replace", timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ERROR: AddressSanitizer" not in run.stderr and "runtime error" not in run.stderr
    assert "malformed" in run.stderr.splitlines()[0]


# -- iostat ---------------------------------------------------------------------------------------

SYSSTAT10 = """Linux 3.10.0-327.el7.x86_64 (oss1) 	03/25/2016 	_x86_64_	(36 CPU)

03/25/2016 09:04:10 PM
avg-cpu:  %user   %nice %system %iowait  %steal   %idle
           0.50    0.00    0.30    0.10    0.00   99.10

Device:         rrqm/s   wrqm/s     r/s     w/s    rkB/s    wkB/s avgrq-sz avgqu-sz   await r_await w_await  svctm  %util
sda               0.00     0.10    0.50    1.20    10.00    20.00    35.29     0.00    1.20    0.50    1.50   0.40   0.07
sdb               0.00     0.00  778.00    0.00 796672.00     0.00  2048.00     7.90   10.15   10.15    0.00   1.28  99.90

03/25/2016 09:04:11 PM
avg-cpu:  %user   %nice %system %iowait  %steal   %idle
           1.50    0.00    2.30   10.10    0.00   86.10

Device:         rrqm/s   wrqm/s     r/s     w/s    rkB/s    wkB/s avgrq-sz avgqu-sz   await r_await w_await  svctm  %util
sda               0.00     0.00    0.00    0.00     0.00     0.00     0.00     0.00    0.00    0.00    0.00   0.00   0.00
sdb               0.00     0.00  390.00    0.00 399360.00     0.00  2048.00     7.90   20.15   20.15    0.00   2.56  99.80
garbage here
"""


def test_iostat_sysstat10_columns():
    reports, skipped = parse_iostat(SYSSTAT10)
    assert len(reports) == 2 and reports[0].since_boot and not reports[1].since_boot
    assert reports[1].time - reports[0].time == 1.0
    assert reports[1].devices["sdb"]["%util"] == 99.8 and reports[1].kb_per_s("sdb", "r") == 399360.0
    assert reports[0].cpu["%idle"] == 99.1
    assert [s.lineno for s in skipped] == [18]


def test_iostat_real_output():
    exe = need_tool("iostat", "apt-get install sysstat")
    out = subprocess.run([exe, "-x", "-t", "1", "2"], capture_output=True, text=True, check=True, timeout=30,
                         env={"S_TIME_FORMAT": "ISO", "LC_ALL": "C", "PATH": "/usr/bin:/bin"}).stdout
    reports, skipped = parse_iostat(out)
    assert not skipped, skipped
    assert len(reports) == 2 and all(r.time for r in reports) and 0.5 < reports[1].time - reports[0].time < 5
    dev = next(iter(reports[1].devices.values()))
    assert "%util" in dev and "r/s" in dev and set(reports[1].cpu) >= {"%user", "%idle"}


# -- exports samples and fixtures -------------------------------------------------------------------

def test_exports_samples_and_deltas():
    st = "snapshot_time 1.0 secs.nsecs\nread_bytes 4 samples [bytes] {0} {0} {1}\nwrite_bytes 2 samples [bytes] 1 1 {2}"
    name = "obdfilter.fs-OST000a.exports.10.0.0.1@o2ib.stats"
    text = (format_sample(10.0, f"{name}=\n" + st.format(MiB, 4 * MiB, 2) + "\n")
            + format_sample(11.0, f"{name}=\n" + st.format(MiB, 4 * MiB, 2).replace("4 samples", "9 samples")
                            .replace(str(4 * MiB), str(9 * MiB)) + "\n")
            + format_sample(12.0, f"{name}=\n" + st.format(MiB, MiB, 2).replace("4 samples", "1 samples") + "\n")
            + "### iez-sample nonsense\n")
    samples, skipped = parse_samples(text)
    assert [t for t, _ in samples] == [10.0, 11.0, 12.0] and len(skipped) == 1
    ivals = analysis.export_deltas(samples)
    assert ivals[0].delta[(10, "10.0.0.1@o2ib")].tolist() == [5, 5 * MiB, 0, 0]
    assert ivals[1].delta[(10, "10.0.0.1@o2ib")].tolist() == [1, MiB, 2, 2]  # cleared: counted from zero


def _fixture_values() -> list[tuple[str, dict[str, str]]]:
    need_fixtures()
    out = []
    for p in sorted(FIXTURES.rglob("*.txt")):
        text = p.read_text()
        if text.lstrip().startswith("snapshot_time"):  # a bare brw_stats file
            out.append((p.name, {"osd-ldiskfs.fs-OST0000.brw_stats": text}))
        else:
            out.append((p.name, parse_getparam(text).values))
    tree = ParamTree(FIXTURES / "lustre_exporter")
    values = {}
    for pattern in ("osd-*.*.brw_stats", "obdfilter.*.stats", "obdfilter.*.exports.*.stats", "ost.OSS.*.stats"):
        values.update(tree.get(pattern))
    out.append(("lustre_exporter", values))
    return out


def test_every_brw_stats_fixture_through_the_profile_tables():
    seen = 0
    for name, values in _fixture_values():
        brw = {k: v for k, v in values.items() if k.endswith(".brw_stats") and "-OST" in k}
        prof = Profile(ProfileMeta(("h",)), analysis.Bins(0, 1), params={"h": ({}, values)})
        rows = brw_rows(prof)
        assert len(rows) == len(brw), name
        for (k, v), row in zip(sorted(brw.items()), rows):
            h = parse_brw_stats(v).histogram("pages per bulk r/w")
            assert row[2] == str(h.read_total + h.write_total if h else 0), (name, k)
            seen += 1
    assert seen >= 8


def test_every_obdfilter_stats_fixture_through_the_rates_table():
    seen = 0
    for name, values in _fixture_values():
        stats = {k: v for k, v in values.items() if k.startswith("obdfilter.") and k.endswith(".stats")
                 and ".exports." not in k}
        later = {}
        for k, v in stats.items():  # the same counters 10 s later, 10 MiB more written
            st = parse_stats(v)
            if st.times.snapshot_ns is None:
                continue
            cs = [c if c.name != "write_bytes" else type(c)(c.name, c.count + 10, c.unit, c.min, c.max, c.sum + 10 * MiB)
                  for c in st.counters]
            if not st.counter("write_bytes"):
                cs.append(type(st.counters[0])("write_bytes", 10, "bytes", MiB, MiB, 10 * MiB))
            later[k] = format_stats(type(st)(type(st.times)(st.times.snapshot_ns + 10 * 10**9), tuple(cs)))
        prof = Profile(ProfileMeta(("h",)), analysis.Bins(0, 1), params={"h": (stats, later)})
        rows = stats_rows(prof)
        assert len(rows) == len(later), (name, prof.problems)
        for row in rows:
            assert row[3] == "1.0" and row[5] == "1.0", (name, row)
            seen += 1
    assert seen >= 3


def test_export_counters_on_fixture_exports():
    values = dict(v for _n, vals in _fixture_values() for v in vals.items() if ".exports." in v[0] and
                  v[0].startswith("obdfilter."))
    got = analysis.export_counters(values)
    assert (0, "10.73.20.12@tcp") in got and (0, "172.20.20.2@o2ib") in got and (1, "0@lo") in got
    assert all(v.tolist() == [0, 0, 0, 0] for v in got.values())  # these exports did no bulk I/O
