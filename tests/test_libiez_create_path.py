"""libiez's create path as its cost was cut (docs/libiez.md "Performance"): an emulated MDS
answer longer than the create's stack buffer still gives the file its planned layout (a
30-component PFL: 1.2 KB of answer and of request, over the 1 KiB on the stack; a larger one's
lov_user_md outgrows the xattr room of /tmp's file system), and the trace's (api, path) table keeps
each record apart across its growth (hashes stored beside the pointers), with every record
whole (its CRC: libiez/src/crc32.c) and a second open of the same name continuing its record."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

from conftest import BUILD, need_built
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.layout import lum
from iez.trace.shard import ShardWarning, read_shards

LIB = BUILD / "libiez" / "libiez.so"
MiB = 1 << 20
COMPONENTS = 30


def pfl(n: int) -> str:
    return ";".join(f"{i * MiB}-{(i + 1) * MiB if i < n - 1 else 'EOF'}/S=1048576,c=1" for i in range(n))


def run_python(code: str, env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_long_mds_answer_and_many_records(tmp_path: Path) -> None:
    need_built(LIB)
    with running_cluster(tmp_path / "emu", make_cluster(ost_size=64 << 30), seed=1) as cd:
        fs = cd.root / "fs"
        long_name, many = fs / "long.dat", fs / "many"
        plan = tmp_path / "p.plan"
        plan.write_text(f"#iez-plan 1\n{long_name}\t{pfl(COMPONENTS)}\n")
        traces = tmp_path / "traces"
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}, "LD_PRELOAD": str(LIB),
               "IEZ_PLAN": str(plan), "IEZ_EMULATED": str(cd.root), "IEZ_TRACE_DIR": str(traces),
               "IEZ_LOG": str(tmp_path / "log")}
        # 600 files: the record table grows from 256 slots twice; each is written again after
        # all were opened once, so each record is found again by its name
        run_python(f"""
import os
open({str(long_name)!r}, "wb").write(b"x" * 10)
os.mkdir({str(many)!r})
names = [os.path.join({str(many)!r}, f"f{{i}}") for i in range(600)]
for i, n in enumerate(names):
    with open(n, "wb") as f:
        f.write(b"a" * (i + 1))
for i, n in enumerate(names):
    with open(n, "ab") as f:
        f.write(b"b" * (i + 1))
""", env)
        placed = lum.decode(os.getxattr(long_name, "user.lustre.lov"))
        assert len(placed.components) == COMPONENTS
        assert [c.end for c in placed.components[:3]] == [MiB, 2 * MiB, 3 * MiB]
    assert not (tmp_path / "log").exists() or "without a layout" not in (tmp_path / "log").read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShardWarning)  # a record whose CRC is wrong would warn
        records = read_shards(traces)
    by_path = {r.path: r for r in records if r.path.startswith(str(fs))}
    assert by_path[str(long_name)].created and by_path[str(long_name)].plan_hit is True
    assert by_path[str(long_name)].layout.count(";") == COMPONENTS - 1
    for i in range(600):
        r = by_path[str(many / f"f{i}")]
        assert (r.created, r.bytes_written, r.plan_hit) == (True, 2 * (i + 1), False), r
