"""Plans with run-time fields (docs/plan-format.md, version 2) on an emulated cluster: real
programs under LD_PRELOAD=libiez.so create files whose names carry a job id, a date and time
stamp, a host name, an MPI rank or a random suffix, and each gets its planned layout; a name that
matches no field (too long, a '/' where a field is) gets the MDS's own, and the program runs as
without a plan."""

from __future__ import annotations

import socket

import test_libiez_emulated as emu
from conftest import need_tool
from iez.plan import format_layout
from test_libiez_emulated import Job, assert_default, assert_planned

cluster, job = emu.cluster, emu.job  # its fixtures: a cluster for this module, a directory a test

SPEC = "S=2097152,c=3,o=4:8:2"


def plan2(job: Job, entries: dict[str, str]) -> None:
    job.plan({}, text="#iez-plan 2\n#app=test\n" + "".join(f"{job.dir}/{k}\t{v}\n" for k, v in entries.items()))


def test_job_id_date_host_and_mktemp_names_get_their_layouts(job):
    plan2(job, {"out.{job}": SPEC, "log.{date:%Y%m%d}-{time:%H%M%S}": "c=2,o=5:6", "{host}.err": "c=2,o=7:9",
                "tmp.{rand:10}": "c=4,o=0:1:2:3", "a{array}.dat": "c=2,o=10:11"})
    script = ("dd if=/dev/zero of=out.$SLURM_JOB_ID bs=64k count=3 status=none\n"
              "echo hi > log.$(date +%Y%m%d-%H%M%S)\n"
              "echo err > $(hostname).err\n"
              "t=$(mktemp -p . tmp.XXXXXXXXXX) && echo tmp > $t && echo $t > tmpname\n"
              "echo x > a$SLURM_ARRAY_TASK_ID.dat\n"
              "echo y > out.4243\n")
    job.run(["sh", "-c", script], SLURM_JOB_ID="4242", SLURM_ARRAY_TASK_ID="7")
    assert_planned(job, "out.4242", SPEC)
    (log,) = [p.name for p in job.dir.glob("log.*")]
    assert_planned(job, log, "c=2,o=5:6")
    assert_planned(job, f"{socket.gethostname().split('.')[0]}.err", "c=2,o=7:9")
    tmp = job.path("tmpname").read_text().strip().removeprefix("./")
    assert_planned(job, tmp, "c=4,o=0:1:2:3")
    assert_planned(job, "a7.dat", "c=2,o=10:11")
    assert_default(job, "out.4243")  # another job's name
    recs = {r.path.removeprefix(f"{job.dir}/"): r for r in job.trace().records}
    assert all(recs[n].plan_hit for n in ("out.4242", log, tmp, "a7.dat")), {n: r.plan_hit for n, r in recs.items()}
    assert not recs["out.4243"].plan_hit


def test_fields_the_process_lacks_or_names_that_do_not_fit_are_plain_misses(job):
    """No job id in the environment: {job} never matches. A random field of 6 does not take 7
    characters, or one with a '-'; an over-long name; the program runs as ever."""
    plan2(job, {"out.{job}": SPEC, "t.{rand:6}": SPEC, "{rand:64}" * 3: SPEC})
    job.run(["sh", "-c", "echo a > out.; echo b > out.x; echo c > t.abcdefg; echo d > t.ab-def; echo e > t.aBc12Z;"
             f"echo f > {'x' * 200}"])
    for name in ("out.", "out.x", "t.abcdefg", "t.ab-def", "x" * 200):
        assert_default(job, name)
    assert_planned(job, "t.aBc12Z", SPEC)
    assert not [line for line in job.log_lines() if "rejected" in line]


def test_rank_named_files_under_mpiexec(job):
    mpiexec = need_tool("mpiexec", "apt-get install mpich")
    plan2(job, {"r{rank}.dat": SPEC, "r{rank}.{date:%Y-%m-%d}": "c=1,o=6"})
    job.run([mpiexec, "-n", "3", "sh", "-c", 'echo $PMI_RANK > r$PMI_RANK.dat; echo > r$PMI_RANK.$(date +%Y-%m-%d)'])
    for k in range(3):
        assert_planned(job, f"r{k}.dat", SPEC)
        (dated,) = job.dir.glob(f"r{k}.2*")
        assert_planned(job, dated.name, "c=1,o=6")
        assert job.path(f"r{k}.dat").read_text() == f"{k}\n"


def test_rsync_temporaries_keep_their_layout_through_the_rename(job, tmp_path):
    """rsync writes .NAME.XXXXXX (its receiver's get_tmpname: a dot, the name, a dot, mkstemp's
    six characters) and renames it: the file keeps the layout its temporary name was planned."""
    rsync = need_tool("rsync", "apt-get install rsync")
    src = tmp_path / "src"
    src.mkdir()
    (src / "data.bin").write_bytes(b"\1" * (3 << 20))
    (src / "notes.txt").write_text("n")
    plan2(job, {".data.bin.{rand:6}": SPEC})
    job.run([rsync, "-a", f"{src}/", f"{job.dir}/"])
    assert job.path("data.bin").read_bytes() == b"\1" * (3 << 20)
    got = job.layout("data.bin")
    assert format_layout(got).startswith("S=2097152,c=3"), format_layout(got)
    assert got.plain is not None and got.plain.osts == (4, 8, 2)
    assert_default(job, "notes.txt")
