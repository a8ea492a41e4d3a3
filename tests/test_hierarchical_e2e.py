"""Hierarchical striping end to end (docs/references.md#s001-hierarchical): a plan gives a shared
file one PFL component per writer group, each on its own OST subset; real iez-bench runs write it
under libiez on an emulated cluster, through MPI-IO (MPI_File_open under mpiexec, libiez-mpi) and
through POSIX (forked ranks, libiez). The layout read back is the plan's exactly, its stored
`user.lustre.lov` is a lov_comp_md_v1 whose components carry the OST lists, the data are the
bytes of a run without iez, per-OST usage puts each component's extent on its own subset, and
`iez getstripe` prints the components with their objects as `lfs getstripe` does."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path


from conftest import BUILD, need_built, need_tool
from iez.cluster import make_cluster
from iez.emulated.mds_client import running_cluster
from iez.emulated.usage import UsageScanner
from iez.layout import lum
from iez.layout.hierarchical import composite, cut, interleave, validate
from iez.layout.layout import LUSTRE_EOF
from iez.layout.stripe import method2_stripe_size
from iez.lustre.getstripe import parse_getstripe
from iez.plan import Plan, save

BENCH = BUILD / "bench_app" / "iez-bench"
LIB = BUILD / "libiez" / "libiez.so"
MPILIB = BUILD / "libiez" / "libiez-mpi.so"
MiB = 1 << 20
RANKS, BLOCK = 4, 4 * MiB  # IOR's shared file, one segment: rank r writes [r*BLOCK, (r+1)*BLOCK)
CLUSTER = make_cluster(4, 4)  # OSTs 0-3 on oss0, 4-7 on oss1, 8-11 on oss2, 12-15 on oss3


def need(path: Path) -> str:
    need_built(path)
    return str(path)


def hierarchical_layout(osts: list[int]):
    """The layout balanced gives a 4-writer shared file on these 8 OSTs: 4 components of 2."""
    size = RANKS * BLOCK
    c = cut(size, RANKS, len(osts), lambda n: method2_stripe_size(size, n))
    assert c is not None and (c.grouping.groups, c.grouping.subset, c.stripe_size) == (4, 2, 2 * MiB)
    order = interleave(osts, {o.index: o.oss for o in CLUSTER.osts})
    fl = composite(c.spans, c.stripe_size, [order[g * 2:g * 2 + 2] for g in range(4)])
    validate(fl, [o.index for o in CLUSTER.osts])
    return fl


def bench(api: str, out: Path, env: dict[str, str] | None) -> None:
    args = [need(BENCH), "-a", api, "-b", "4m", "-t", "1m", "-s", "1", "-o", str(out), "-k", "-w"]
    if api == "MPIIO":
        args = [need_tool("mpiexec", "apt-get install mpich"), "-n", str(RANKS), *args]
    else:
        args[1:1] = ["-n", str(RANKS)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=180, env=env)
    assert r.returncode == 0, f"{args}: {r.returncode}\n{r.stdout}\n{r.stderr}"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_shared_files_written_on_their_planned_subsets(tmp_path):
    need(LIB), need(MPILIB)
    plan = {"mpiio": hierarchical_layout(list(range(8))), "posix": hierarchical_layout(list(range(8, 16)))}
    assert [c.layout.osts for c in plan["mpiio"].components] == [(0, 4), (1, 5), (2, 6), (3, 7)]
    with running_cluster(tmp_path / "emu", CLUSTER, seed=3) as cd:
        d = cd.fs / "ior"
        d.mkdir()
        p = Plan(meta={"app": "ior"})
        for name, fl in plan.items():
            p.add(str(d / name), fl)
        save(p, tmp_path / "plan")
        base = {k: v for k, v in os.environ.items() if not k.startswith("IEZ_")}
        env = dict(base, IEZ_EMULATED=str(cd.root), IEZ_PLAN=str(tmp_path / "plan"), IEZ_MODE="place",
                   IEZ_LOG=str(tmp_path / "libiez.log"), IEZ_APP="ior")
        bench("MPIIO", d / "mpiio", dict(env, LD_PRELOAD=str(MPILIB)))
        bench("POSIX", d / "posix", dict(env, LD_PRELOAD=str(LIB)))
        (tmp_path / "ref").mkdir()
        for api in ("MPIIO", "POSIX"):  # the same runs without iez, outside the cluster
            bench(api, tmp_path / "ref" / api.lower(), base)

        usage = UsageScanner(cd.fs).scan()
        for name, fl in plan.items():
            f = d / name
            raw = os.getxattr(f, "user.lustre.lov")
            assert lum.parse(raw).magic == lum.LOV_USER_MAGIC_COMP_V1
            got = lum.decode(raw)
            # exactly the plan: the MDS numbers the components 1..n and names each one's first OST
            assert got == replace(fl, components=tuple(
                replace(c, id=i + 1, layout=replace(c.layout, stripe_offset=c.layout.osts[0]))
                for i, c in enumerate(fl.components)))
            assert f.stat().st_size == RANKS * BLOCK
            assert digest(f) == digest(tmp_path / "ref" / name)

            shown = subprocess.run([str(Path(sys.executable).with_name("iez")), "getstripe", str(f)],
                                   capture_output=True, text=True, timeout=60)
            assert shown.returncode == 0, shown.stderr
            assert "  lcm_entry_count:   4\n" in shown.stdout and shown.stdout.count("lcme_flags:          init") == 4
            (read,) = parse_getstripe(shown.stdout).files
            # lfs shows each component instantiated ("init"), with its objects
            assert read.layout == replace(got, components=tuple(replace(c, flags=lum.LCME_FL_INIT)
                                                                for c in got.components))
            for g, c in enumerate(fl.components):
                a, b = c.layout.osts
                assert f"      - 0: {{ l_ost_idx: {a}," in shown.stdout and f"      - 1: {{ l_ost_idx: {b}," in shown.stdout
                assert c.end == (LUSTRE_EOF if g == 3 else (g + 1) * BLOCK)  # each writer's block, one component
        # per-OST usage: each writer's 4 MiB block on its own two OSTs, 2 MiB each; none elsewhere
        assert usage.bytes_on == {o: 2 * MiB for o in range(16)}
        assert usage.objects == {o: 1 for o in range(16)}
    assert not (tmp_path / "libiez.log").exists() or "refused" not in (tmp_path / "libiez.log").read_text()
