import os
import subprocess

import pytest

from conftest import BUILD
from iez import fields as F
from iez import plan as P
from iez.alloc.policy import AllocOptions
from iez.alloc.registry import get_policy
from iez.cluster import Snapshot, make_cluster
from iez.errors import ConfigError
from iez.layout import LUSTRE_EOF, Component, FileLayout, Layout
from iez.pipeline import check_placements, make_plan
from iez.predict.aipa import predict_next_run
from iez.request import Request

MiB = 1 << 20


def sample() -> P.Plan:
    p = P.Plan(meta={"app": "hacc", "run": "3"})
    p.add("/mnt/iez/a", Layout(stripe_size=100532224, osts=(8, 13, 12, 9, 7, 4, 3, 5)))
    p.add("/mnt/iez/b", Layout(stripe_size=MiB, stripe_count=4, stripe_offset=2, pool="fast"))
    p.add("/mnt/iez/c", FileLayout(components=(
        Component(0, 64 * MiB, Layout(stripe_size=MiB, stripe_count=1)),
        Component(64 * MiB, LUSTRE_EOF, Layout(stripe_size=4 * MiB, osts=(1, 5, 9, 13))))))
    p.add("/mnt/iez/d", Layout())
    return p


def test_roundtrip(tmp_path):
    p = sample()
    text = P.dumps(p)
    assert text.startswith("#iez-plan 1\n#app=hacc run=3\n")
    assert "/mnt/iez/a\tS=100532224,c=8,o=8:13:12:9:7:4:3:5\n" in text
    assert "/mnt/iez/c\t0-67108864/S=1048576,c=1;67108864-EOF/S=4194304,c=4,o=1:5:9:13\n" in text
    q = P.loads(text)
    assert q.entries == p.entries and q.meta == p.meta
    P.save(p, tmp_path / "plan")
    assert P.load(tmp_path / "plan").entries == p.entries


@pytest.mark.parametrize("text, msg", [
    ("", "not an iez plan"),
    ("#iez-plan 3\n", "version 3"),
    ("#iez-plan 2\n/a.{user}\tc=1\n", "unknown field {user}"),
    ("#iez-plan 2\n/a.}\tc=1\n", "lone '}'"),
    ("#iez-plan 2\n/a.{job\tc=1\n", "without its '}'"),
    ("#iez-plan 2\n/a.{rand:65}\tc=1\n", "1 to 64"),
    ("#iez-plan 2\n/a.{date:%Y/%m}\tc=1\n", "bad date format"),
    ("#iez-plan 2\n/a.{job}\tc=1\n/a.{job}\tc=1\n", ":3: plan: /a.{job} is planned twice"),
    ("#iez-plan 1\nrelative\tc=1\n", "not absolute"),
    ("#iez-plan 1\n/a\n", ":2: expected PATH<TAB>LAYOUT"),
    ("#iez-plan 1\n/a\tc=1\n/a\tc=2\n", ":3: plan: /a is planned twice"),
    ("#iez-plan 1\n/a\tX=1\n", "bad layout field"),
    ("#iez-plan 1\n/a\tS=1000\n", "64 KiB"),
    ("#iez-plan 1\n/a\tc=1,c=2\n", "given twice"),
    ("#iez-plan 1\n/a\to=1:x\n", "bad number"),
    ("#iez-plan 1\n/a\t5-EOF/c=1\n", "start at offset 0"),
    ("#iez-plan 1\n/a\t0-x/c=1\n", "bad extent"),
])
def test_bad_plans(text, msg):
    with pytest.raises(ConfigError) as e:
        P.loads(text, source="p")
    assert msg in str(e.value)


def test_load_binary_garbage(tmp_path):
    f = tmp_path / "g"
    f.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not an iez plan"):
        P.load(f)


def test_save_never_writes_through_a_planted_link(tmp_path):
    """A temporary name iez chose by itself (`.plan.tmp`) was a trap: a link planted there made
    save() truncate its target. Now the temporary file is made with O_EXCL under a random name."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"x" * 4096)
    for trap in (".plan.tmp", ".plan.tmp.tmp"):
        (tmp_path / trap).symlink_to(victim)
    P.save(sample(), tmp_path / "plan")
    assert victim.read_bytes() == b"x" * 4096
    assert P.load(tmp_path / "plan").entries == sample().entries
    assert sorted(p.name for p in tmp_path.iterdir()) == [".plan.tmp", ".plan.tmp.tmp", "plan", "victim"]
    assert (tmp_path / "plan").stat().st_mode & 0o777 == 0o644 & ~_umask()


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


@pytest.mark.timeout(20)
def test_load_refuses_what_is_not_a_bounded_regular_file(tmp_path):
    """A FIFO as a plan hung the reader; a device fed it forever; a huge file filled memory."""
    os.mkfifo(tmp_path / "fifo")
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(P.MAX_PLAN_BYTES + 1)
    for path, why in ((tmp_path / "fifo", "not a regular file"), ("/dev/zero", "not a regular file"),
                      (tmp_path, "not a regular file"), (big, "larger than 256 MiB"),
                      (tmp_path / "missing", "No such file")):
        with pytest.raises(ConfigError, match=why) as e:
            P.load(path)
        assert "\n" not in str(e.value)


def test_templated_round_trip_and_version():
    """A plan with a field is written as version 2; one without stays version 1, so a reader
    of version 1 still takes it. A file's own braces are escaped into a key and back."""
    p = P.Plan()
    p.add("/s/out.{job}.{date:%Y%m%d}", Layout(stripe_count=2))
    p.add(F.escape("/s/odd{name}"), Layout(stripe_count=3))
    text = P.dumps(p)
    assert text.startswith("#iez-plan 2\n") and "/s/odd{{name}}\tc=3\n" in text
    assert P.loads(text).entries == p.entries
    assert P.dumps(sample()).startswith("#iez-plan 1\n")
    assert P.loads("#iez-plan 1\n/s/odd{name}\tc=3\n").entries == {"/s/odd{{name}}": FileLayout.of(Layout(stripe_count=3))}
    with pytest.raises(ConfigError, match="unknown field"):
        p.add("/s/{nope}", Layout())
    assert F.parse_path("/a/{{x}}.{rand:6}") == ("/a/{x}.", F.Field("rand", "6"))
    assert F.templated("/a/{job}") and not F.templated("/a/{{job}}")


def test_matcher_fields():
    p = P.loads("#iez-plan 2\n/o/out.{job}\tc=1\n/o/r{rank}.{date:%Y-%m-%d}\tc=2\n/o/.x.{rand:6}\tc=3\n"
                "/o/.x.{time:%H%M%S}\tc=4\n/o/.x.000000\tc=5\n")
    m = p.matcher({"job": "42", "rank": "3"})
    assert m("/o/out.42") == "/o/out.{job}" and m("/o/out.43") is None
    assert m("/o/r3.2026-11-24") == "/o/r{rank}.{date:%Y-%m-%d}"
    assert m("/o/r3.2026-13-24") is None and m("/o/r4.2026-11-24") is None and m("/o/r3.2026-11-24x") is None
    assert m("/o/.x.aB3dE9") == "/o/.x.{rand:6}" and m("/o/.x.a/3dE9") is None and m("/o/.x.aB3dE") is None
    assert m("/o/.x.120000") == "/o/.x.{rand:6}"  # two entries match: the earlier line
    assert m("/o/.x.000000") == "/o/.x.000000"  # a literal entry before any template
    assert p.matcher({})("/o/out.42") is None  # no job id in this process: never a hit


def test_fields_of_the_process():
    """The job and array ids of Slurm, PBS, LSF and Flux, the MPI rank, the host short and full."""
    assert F.fields_of({"SLURM_JOB_ID": "7", "PBS_JOBID": "8", "SLURM_ARRAY_TASK_ID": "2", "PMI_RANK": "03"},
                       "nid001.cluster.org") == {"job": "7", "array": "2", "rank": "3", "host": "nid001",
                                                 "fqdn": "nid001.cluster.org"}
    assert F.fields_of({"FLUX_JOB_ID": "f2yFjNm7h", "LSB_JOBINDEX": "0", "PMI_RANK": "x", "PMIX_RANK": "1"},
                       "") == {"job": "f2yFjNm7h", "array": "0", "rank": "1"}


def test_predicted_templates_are_placed_written_and_matched_by_libiez(tmp_path):
    """The loop over a templated name: runs whose names carry a job id, a date and an rsync
    temporary → prediction (keys with fields) → allocation (keyed by them) → the plan file
    (version 2) → libiez's parser, in a process of the next job, finds each new name's layout."""
    def run(job: int, day: int, sfx: str) -> list[Request]:
        return [Request(f"/lus/out.{job}.{k}", (k + 1) << 24, rank=k, run=str(job)) for k in range(2)] + [
            Request(f"/lus/log.2026-11-{day:02d}", 1 << 20, run=str(job)),
            Request(f"/lus/.res.bin.{sfx}", 64 << 20, run=str(job), final_path="/lus/res.bin")]

    pred = predict_next_run([run(4100 + 9 * i, 2 + 3 * i, f"aB{i}cD{i}") for i in range(3)])
    cluster = make_cluster(2, 4)
    placed = get_policy("balanced").place(pred.requests, cluster, Snapshot.from_cluster(cluster), AllocOptions())
    check_placements("balanced", pred.requests, placed)
    plan = make_plan("app", 4, "balanced", cluster, placed, created=0)
    P.save(plan, tmp_path / "plan")
    assert (tmp_path / "plan").read_text().startswith("#iez-plan 2\n")
    names = ["/lus/out.5000.0", "/lus/out.5000.1", "/lus/log.2026-12-01", "/lus/.res.bin.Zz9Yy8", "/lus/out.4118.0"]
    probe = BUILD / "libiez" / "iez-probe"
    out = subprocess.run([str(probe), "find", str(tmp_path / "plan"), *names], capture_output=True, text=True,
                         env={**{k: v for k, v in os.environ.items() if not k.startswith("SLURM")}, "SLURM_JOB_ID": "5000"},
                         timeout=60).stdout.splitlines()
    want = {p.path: P.format_layout(p.layout) for p in placed}
    assert out == [want["/lus/out.{job}.0"], want["/lus/out.{job}.1"], want["/lus/log.{date:%Y-%m-%d}"],
                   want["/lus/.res.bin.{rand:6}"], "-"]
