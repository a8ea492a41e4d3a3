"""The install (docs/install.md), as a site does it: `cmake --install` of the existing build tree
into a staging prefix, the Python package pip-installed into a venv at that prefix (the /opt/iez
layout) and into a venv elsewhere, each finding the staged libiez; a job run from the staged
prefix through the Slurm TaskProlog on an emulated cluster, placed by a plan; the pkg-config
files compiled against; the deploy/ files checked by their own tools (systemd-analyze, Lmod,
luac, bash)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import BUILD, ROOT, need_built, need_tool

LOCK = "/tmp/iez-build.lock"  # every build of the shared tree takes it (the helpers' rules)
LMOD = Path("/usr/share/lmod/lmod/libexec/lmod")
VERSION = "0.1.0"


def run(cmd, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 120)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def ok(cmd, **kw) -> str:
    r = run(cmd, **kw)
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}): {r.stderr}{r.stdout}"
    return r.stdout


def clean_env(**extra: str) -> dict[str, str]:
    """A login-like environment: none of this checkout's settings, no IEZ_*, no pkg-config path."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    return {**env, **extra}


def pip_install(venv: Path, src: Path) -> None:
    """`pip install .` of the package into `venv`, its dependencies seen through a .pth to this
    checkout's venv (installing numpy and friends again would take minutes). Built from a copy
    of the sources, so setuptools' build/ never lands in the CMake build tree."""
    from importlib.metadata import version

    if int(version("setuptools").split(".")[0]) < 77:  # pyproject.toml's build requirement, met offline
        pytest.fail("setuptools >= 77 is missing from .venv: .venv/bin/pip install 'setuptools>=77' (make test does it)")
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    ok([base, "-m", "venv", "--without-pip", venv])
    purelib = Path(run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                   .stdout.strip())
    (purelib / "iez-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    ok([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", src],
       env=clean_env(), timeout=300)


@pytest.fixture(scope="module")
def package_src(tmp_path_factory) -> Path:
    """A copy of what `pip install .` reads."""
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / f, src / f)
    return src


@pytest.fixture(scope="module")
def stage(tmp_path_factory, package_src) -> Path:
    """The build tree configured again (the install rules are generated then) and installed into a
    staging prefix, under the build lock; then a venv with iez at the same prefix."""
    need_built(BUILD / "libiez" / "libiez.so", BUILD / "libiez" / "libiez-mpi.so", BUILD / "sim" / "iez-sim",
               BUILD / "bench_app" / "iez-bench")
    need_tool("flock", "apt-get install util-linux")
    prefix = tmp_path_factory.mktemp("install") / "opt-iez"
    ok(["flock", LOCK, "cmake", "-S", ROOT, "-B", BUILD], timeout=300)
    ok(["flock", LOCK, "cmake", "--install", BUILD, "--prefix", prefix], timeout=300)
    (prefix / "install_manifest.txt").write_text((BUILD / "install_manifest.txt").read_text())
    pip_install(prefix, package_src)
    return prefix


@pytest.fixture(scope="module")
def other_venv(tmp_path_factory, package_src) -> Path:
    """iez pip-installed into a venv of its own, away from both the checkout and the prefix."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    pip_install(venv, package_src)
    return venv


def test_layout_of_the_staged_prefix(stage):
    for rel in ("lib/iez/libiez.so", "lib/iez/libiez-mpi.so", "lib/iez/libliopprof.so", "lib/iez/libiocop.a",
                "include/iez/iez.h", "include/iez/iocop.h",
                "lib/pkgconfig/iez.pc", "lib/pkgconfig/iez-mpi.pc", "lib/pkgconfig/iocop.pc",
                f"share/modulefiles/iez/{VERSION}.lua", f"share/modulefiles/iez/{VERSION}",
                "share/iez/slurm/iez-taskprolog.sh", "share/iez/slurm/iez-epilog.sh", "share/iez/iez.env.example"):
        assert (stage / rel).is_file(), rel
    # What was installed, the files written at install time included, is listed for an uninstall.
    listed = set((stage / "install_manifest.txt").read_text().split())
    assert {str(stage / rel) for rel in ("lib/iez/libiez.so", "lib/pkgconfig/iez.pc", "share/iez/slurm/iez-epilog.sh",
                                          f"share/modulefiles/iez/{VERSION}.lua")} <= listed
    for prog in ("iez-sim", "iez-bench", "iocop-client", "liopprof-rpctrace", "iez-probe", "iez"):
        assert os.access(stage / "bin" / prog, os.X_OK), prog
    # Installed programs run from the prefix: iez-bench keeps Debian's private MPICH HDF5 directory.
    assert "iez-bench" in ok([stage / "bin" / "iez-bench", "--help"])
    # Every path the installed text files name is the prefix's, none the repository's /opt/iez.
    for f in [*(stage / "share").rglob("*"), *(stage / "lib" / "pkgconfig").glob("*.pc")]:
        if f.is_file():
            assert "/opt/iez" not in f.read_text(), f


def test_iez_in_the_prefix_finds_its_libiez_and_programs(stage):
    """The recommended layout (a venv and the C install in one prefix): nothing to set."""
    out = ok([stage / "bin" / "iez", "--version"], env=clean_env(), cwd="/")
    assert out.splitlines() == [f"iez {VERSION}", f"libiez {VERSION}: {stage}/lib/iez/libiez.so"]
    code = ("from iez.sim.engine import engine_path; from iez.workload.bench import bench_path; "
            "from iez.preload import libiez_path; from iez.profile.rpctrace import library_path; "
            "print(engine_path(), bench_path(), libiez_path('mpi'), library_path())")
    got = ok([stage / "bin" / "python", "-c", code], env=clean_env(), cwd="/").split()
    assert got == [f"{stage}/bin/iez-sim", f"{stage}/bin/iez-bench", f"{stage}/lib/iez/libiez-mpi.so",
                   f"{stage}/lib/iez/libliopprof.so"]


def test_a_venv_elsewhere_finds_it_by_env_pkgconfig_or_module(stage, other_venv):
    iez = other_venv / "bin" / "iez"
    bare = ok([iez, "--version"], env=clean_env(), cwd="/").splitlines()[1]
    assert str(BUILD) not in bare and str(stage) not in bare  # not this checkout's build tree
    want = f"libiez {VERSION}: {stage}/lib/iez/libiez.so"
    by_pc = ok([iez, "--version"], env=clean_env(PKG_CONFIG_PATH=f"{stage}/lib/pkgconfig"), cwd="/")
    assert by_pc.splitlines()[1] == want
    by_env = ok([iez, "--version"], env=clean_env(IEZ_LIBDIR=f"{stage}/lib/iez"), cwd="/")
    assert by_env.splitlines()[1] == want
    # IEZ_LIBIEZ, the one-file override, still wins over all of them.
    mpi = f"{stage}/lib/iez/libiez-mpi.so"
    one = ok([iez, "--version"], env=clean_env(IEZ_LIBDIR=f"{stage}/lib/iez", IEZ_LIBIEZ=mpi), cwd="/")
    assert one.splitlines()[1] == f"libiez {VERSION}: {mpi}"


@pytest.mark.parametrize("flavour", ["lua", "tcl"])
def test_module_file_sets_the_paths(stage, other_venv, tmp_path, flavour):
    if not LMOD.exists():
        pytest.fail("Lmod is not installed: apt-get install lmod")
    modpath = stage / "share" / "modulefiles"
    if flavour == "tcl":  # Lmod prefers the .lua of a version: the Tcl one alone in a tree of its own
        (tmp_path / "iez").mkdir()
        shutil.copy(modpath / "iez" / VERSION, tmp_path / "iez" / VERSION)
        modpath = tmp_path
    else:
        need_tool("luac", "apt-get install lua5.1 (or lua5.3)")
        ok(["luac", "-p", ROOT / "deploy" / "modulefiles" / "iez.lua"])
    script = (f'eval "$({LMOD} bash load iez)" && {other_venv}/bin/iez --version && pkg-config --cflags iez '
              '&& command -v iez-sim && echo "$IEZ_LIBDIR"')
    out = [line.strip() for line in ok(["bash", "-c", script], env=clean_env(MODULEPATH=str(modpath)), cwd="/")
           .splitlines()]
    assert out[1:] == [f"libiez {VERSION}: {stage}/lib/iez/libiez.so", f"-I{stage}/include/iez",
                       f"{stage}/bin/iez-sim", f"{stage}/lib/iez"]


def test_pkgconfig_compiles_and_links_against_the_staged_library(stage, tmp_path):
    need_tool("pkg-config", "apt-get install pkg-config")
    env = clean_env(PKG_CONFIG_PATH=f"{stage}/lib/pkgconfig")
    flags = ok(["pkg-config", "--cflags", "--libs", "iez"], env=env).split()
    assert flags == [f"-I{stage}/include/iez", f"-L{stage}/lib/iez", f"-Wl,-rpath,{stage}/lib/iez", "-liez"]
    assert ok(["pkg-config", "--modversion", "iez", "iez-mpi", "iocop"], env=env).split() == [VERSION] * 3
    assert ok(["pkg-config", "--variable=preload_mpi", "iez"], env=env).strip() == f"{stage}/lib/iez/libiez-mpi.so"
    prog = tmp_path / "v.c"
    prog.write_text('#include <stdio.h>\n#include <iez.h>\n#include <iocop.h>\n'
                    'int main(void) { printf("%s %d %d\\n", iez_version(), iez_io_begin("p"), iez_io_end());\n'
                    '  return iocop_connect == 0; }\n')
    libs = ok(["pkg-config", "--cflags", "--libs", "iez", "iocop"], env=env).split()
    ok(["cc", "-o", tmp_path / "v", prog, *libs])
    # IO-Cop is off without IEZ_ACCESS: no token taken, none given back.
    assert ok([tmp_path / "v"], env=clean_env()).strip() == f"{VERSION} 0 0"


def test_taskprolog_prints_the_task_environment(stage, tmp_path):
    prolog = stage / "share" / "iez" / "slurm" / "iez-taskprolog.sh"
    ok(["bash", "-n", prolog])
    base = clean_env(IEZ_SITE_CONF="/nonexistent", IEZ_SITE_TRACE_ROOT=str(tmp_path), SLURM_JOB_ID="4242",
                     SLURM_JOB_NAME="-my run (v2)!", LD_PRELOAD="/site/other.so")
    assert ok([prolog], env=base).splitlines() == [
        f"export LD_PRELOAD={stage}/lib/iez/libiez-mpi.so /site/other.so", "export IEZ_APP=my_run__v2__",
        "export IEZ_RUN=4242", f"export IEZ_TRACE_DIR={tmp_path}/4242/my_run__v2__"]
    conf = tmp_path / "slurm.env"
    conf.write_text(f"IEZ_SITE_LIB=libiez.so\nIEZ_SITE_TRACE_ROOT={tmp_path}/site\n")
    own = ok([prolog], env={**base, "IEZ_SITE_CONF": str(conf), "IEZ_APP": "hacc", "IEZ_TRACE_DIR": "/mine"})
    assert own.splitlines() == [f"export LD_PRELOAD={stage}/lib/iez/libiez.so /site/other.so",
                                "export IEZ_APP=hacc", "export IEZ_RUN=4242"]
    # Nothing for a job that opts out, one `iez run` already preloads libiez in, or outside Slurm.
    assert ok([prolog], env={**base, "IEZ_SITE": "off"}) == ""
    assert ok([prolog], env={**base, "LD_PRELOAD": f"/x/libiez-mpi.so:{stage}/a.so"}) == ""
    assert ok([prolog], env={k: v for k, v in base.items() if k != "SLURM_JOB_ID"}) == ""
    ok(["bash", "-n", stage / "share" / "iez" / "slurm" / "iez-epilog.sh"])


def test_a_job_from_the_prefix_through_the_taskprolog_is_traced_placed_and_uploaded(stage, tmp_path, controller):
    """The Slurm path without Slurm: the TaskProlog's exports applied to a task as slurmstepd
    applies them, the task the staged iez-bench, its file placed by a plan with the job's id;
    then the Epilog uploads the trace to a real controller (no scontrol here: a one-node job)."""
    iez = stage / "bin" / "iez"
    emu, traces = tmp_path / "emu", tmp_path / "traces"
    ok([iez, "emulate", "init", emu], env=clean_env())
    ok([iez, "emulate", "up", emu], env=clean_env())
    try:
        plan = tmp_path / "job.plan"
        plan.write_text(f"#iez-plan 2\n{emu}/fs/out.{{job}}\tS=1048576,o=2:7:11\n")
        job = clean_env(SLURM_JOB_ID="77", SLURM_JOB_NAME="ior", IEZ_SITE_CONF="/nonexistent",
                        IEZ_SITE_TRACE_ROOT=str(traces))
        exports = ok([stage / "share" / "iez" / "slurm" / "iez-taskprolog.sh"], env=job)
        task = dict(job, IEZ_EMULATED=str(emu), IEZ_PLAN=str(plan), IEZ_LOG="stderr")
        for line in exports.splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            task[name] = value
        r = run([stage / "bin" / "iez-bench", "-w", "-k", "-b", "4m", "-t", "1m", "-o", f"{emu}/fs/out.77"], env=task)
        assert r.returncode == 0, r.stderr
        assert re.search(r"plan: 1 hits, 0 misses \(1 entries\)", r.stderr), r.stderr
        layout = json.loads(ok([iez, "getstripe", "--json", f"{emu}/fs/out.77"], env=clean_env()))
        assert [(c["osts"], c["stripe_size"]) for c in layout[0]["components"]] == [([2, 7, 11], 1 << 20)], layout
        shown = json.loads(ok([iez, "trace", "show", "--json", traces / "77" / "ior"], env=clean_env()))
        assert f"{emu}/fs/out.77" in json.dumps(shown)

        c = controller(cluster=(emu / "cluster.toml").read_text())
        conf = tmp_path / "slurm.env"
        conf.write_text(f"IEZ_SITE_TRACE_ROOT={traces}\nIEZ_CONTROLLER={c.url}\nIEZ_TOKEN_FILE={c.root / 'site'}\n"
                        f"IEZ_SITE_IEZ={iez}\n")
        epilog = clean_env(SLURM_JOB_ID="77", SLURM_JOB_UID=str(os.getuid()), SLURM_JOB_GID=str(os.getgid()),
                           IEZ_SITE_CONF=str(conf))
        r = run([stage / "share" / "iez" / "slurm" / "iez-epilog.sh"], env=epilog)
        assert r.returncode == 0 and not (traces / "77").exists(), r.stderr  # uploaded, then removed
        runs = c.get("/apps/ior").json()["runs"]
        assert (runs[0]["run"], runs[0]["traced"], runs[0]["files"]) == (1, True, 1), runs  # run 1: this job
    finally:
        run([iez, "emulate", "down", emu], env=clean_env())


def test_site_wide_placement_through_the_taskprolog_and_the_epilog(stage, tmp_path):
    """Slurm site-wide, both halves: job 1 is traced (no plan yet) and its Epilog uploads it; the
    controller plans the application's next run; job 2's TaskProlog fetches that plan (the first
    task of the node, into the user's own directory), its file is placed from it under the new
    job id, and its Epilog uploads it as the planned run."""
    from iez.cluster import make_cluster
    from iez.demo.stack import control_plane

    with control_plane(tmp_path / "plane", make_cluster(ost_size=1 << 30), seed=3) as s:
        out, traces, tmp = s.cd.fs / "site", tmp_path / "traces", tmp_path / "tmp"
        out.mkdir()
        tmp.mkdir()
        token = tmp_path / "site.token"
        token.write_text(s.plane.site + "\n")
        conf = tmp_path / "slurm.env"
        conf.write_text(f"IEZ_SITE_TRACE_ROOT={traces}\nIEZ_CONTROLLER={s.url}\nIEZ_TOKEN_FILE={token}\n"
                        f"IEZ_SITE_IEZ={stage / 'bin' / 'iez'}\n")
        slurm = stage / "share" / "iez" / "slurm"
        stderr = {}
        for job in ("5101", "5102"):
            env = clean_env(SLURM_JOB_ID=job, SLURM_JOB_NAME="site", IEZ_SITE_CONF=str(conf), TMPDIR=str(tmp))
            exports = ok([slurm / "iez-taskprolog.sh"], env=env)
            task = dict(env, IEZ_EMULATED=str(s.cd.root), IEZ_LOG="stderr")
            for line in exports.splitlines():
                name, _, value = line.removeprefix("export ").partition("=")
                task[name] = value
            assert ("IEZ_PLAN" in task) == (job == "5102"), exports  # no plan before the first run
            r = run([stage / "bin" / "iez-bench", "-w", "-k", "-b", "4m", "-t", "1m", "-o", f"{out}/out.{job}"],
                    env=task)
            assert r.returncode == 0, r.stderr
            stderr[job] = r.stderr
            r = run([slurm / "iez-epilog.sh"], env=dict(env, SLURM_JOB_UID=str(os.getuid()),
                                                         SLURM_JOB_GID=str(os.getgid())))
            assert r.returncode == 0 and not (traces / job).exists(), r.stderr  # uploaded, then removed
            if job == "5101":
                with s.client() as c:
                    assert c.fetch_plan("site", wait=60).status == "ready"
        assert re.search(r"plan: 1 hits, 0 misses", stderr["5102"]), stderr["5102"]  # out.{job} matched
        with s.client() as c:
            runs = c.app("site")["runs"]
        traced = [(r["run"], r["plan_hits"], r["plan_misses"]) for r in runs if r["traced"]]
        assert traced == [(1, 0, 0), (2, 1, 0)], runs  # job 2 uploaded as the planned run 2


def test_systemd_units_verify_and_are_hardened(stage, tmp_path):
    need_tool("systemd-analyze", "apt-get install systemd")
    installed = stage / "share" / "iez" / "systemd"
    assert sorted(u.name for u in installed.iterdir()) == ["iez-access.service", "iez-collect@.service",
                                                          "iez-controller.service"]
    for unit in installed.iterdir():
        assert f"ExecStart={stage}/bin/iez " in unit.read_text()
    # The collector template instantiated for both kinds of server, as `systemctl enable iez-collect@oss` does.
    template = (installed / "iez-collect@.service").read_text()
    instances = tmp_path / "units"
    instances.mkdir()
    for kind in ("oss", "mds"):
        (instances / f"iez-collect@{kind}.service").write_text(template)
    units = [installed / "iez-access.service", installed / "iez-controller.service", *sorted(instances.iterdir())]
    for unit in units:
        r = run(["systemd-analyze", "verify", unit])
        # verify exits 0 on unknown keys too: it must print nothing at all.
        assert r.returncode == 0 and r.stdout + r.stderr == "", f"{unit.name}: {r.stderr}{r.stdout}"
        # Exposure at most 2.5 of 10 ("OK"): the collectors are root without capabilities, the rest dynamic users.
        r = run(["systemd-analyze", "security", "--offline=yes", "--threshold=25", unit])
        assert r.returncode == 0, f"{unit.name}: {r.stdout.splitlines()[-1:]}"


def test_debian_package_holds_the_install_under_opt_iez(stage, tmp_path):
    need_tool("dpkg-deb", "apt-get install dpkg")  # `stage` configured the build tree: CPackConfig.cmake is current
    ok(["flock", LOCK, "cpack", "-G", "DEB", "--config", BUILD / "CPackConfig.cmake", "-B", tmp_path], timeout=300)
    deb, = tmp_path.glob(f"iez_{VERSION}_*.deb")
    files = {line.split()[-1] for line in ok(["dpkg-deb", "-c", deb]).splitlines()}
    for rel in ("lib/iez/libiez.so", "lib/iez/libiez-mpi.so", "bin/iez-sim", "bin/iez-bench", "include/iez/iez.h",
                "lib/pkgconfig/iez.pc", f"share/modulefiles/iez/{VERSION}.lua", "share/iez/systemd/iez-collect@.service"):
        assert f"./opt/iez/{rel}" in files, rel
    # dpkg-shlibdeps found what the programs need (SimGrid for iez-sim).
    control = ok(["dpkg-deb", "-f", deb, "Depends"])
    assert "libc6" in control and "libsimgrid" in control, control
    ok(["dpkg-deb", "-x", deb, tmp_path / "root"])
    assert "prefix=/opt/iez\n" in (tmp_path / "root/opt/iez/lib/pkgconfig/iez.pc").read_text()
