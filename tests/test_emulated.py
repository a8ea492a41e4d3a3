"""The emulated Lustre cluster: pure parts directly, the whole thing through real processes."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from iez.cluster import make_cluster
from iez.emulated.paramtree import Accumulator, OSTSpace, render_mds, render_oss, render_stats
from iez.emulated.usage import BLOCK, ost_bytes
from iez.layout import Layout
from iez.plan import parse_layout

MiB = 1 << 20


# -- pure parts ---------------------------------------------------------------------------------

def test_ost_bytes_from_sizes_and_layouts():
    a = Layout(stripe_size=MiB, osts=(3, 1))
    b = Layout(stripe_size=MiB, osts=(1,))
    got = ost_bytes([(3 * MiB + 10, a), (5, b)])
    # a: stripe 0 (OST3) holds [0,1M) [2M,3M); stripe 1 (OST1) holds [1M,2M) [3M,3M+10)
    assert got == {3: 2 * MiB, 1: MiB + BLOCK + BLOCK}


def test_counter_rpc_accounting_and_u64_wrap():
    c = Accumulator()
    c.add_bytes(3 * MiB + 100)
    assert (c.samples, c.min, c.max, c.sum) == (4, 100, MiB, 3 * MiB + 100)
    big = Accumulator()
    big.add(1 << 40, times=1 << 30)  # sum of squares overflows u64, as in the kernel
    assert big.sumsq == ((1 << 80) * (1 << 30)) & ((1 << 64) - 1)


def test_render_stats_prints_only_used_counters():
    c = Accumulator()
    c.add_bytes(2 * MiB)
    text = render_stats({"read_bytes": (Accumulator(), "bytes"), "write_bytes": (c, "bytes")}, 100.5, 90.25)
    lines = text.splitlines()
    assert lines[0] == "snapshot_time             100.500000000 secs.nsecs"
    assert lines[2] == "elapsed_time              10.250000000 secs.nsecs"
    assert lines[3] == f"write_bytes               2 samples [bytes] {MiB} {MiB} {2 * MiB} {2 * MiB * MiB}"
    assert not any(line.startswith("read_bytes") for line in lines)


def test_render_trees_paths():
    c = make_cluster(n_oss=2, osts_per_oss=2, ost_size=1 << 30, fsname="emu")
    space = {i: OSTSpace(1 << 20, 1000, 900, 10, 5) for i in range(4)}
    oss1 = render_oss(c, "oss1", space, {}, 1.0, 0.0)
    assert oss1["sys/fs/lustre/obdfilter/emu-OST0002/kbytesavail"] == "900\n"
    assert "sys/fs/lustre/obdfilter/emu-OST0000/kbytesavail" not in oss1  # oss0's OST
    mds = render_mds(c, space)
    assert mds["proc/fs/lustre/lod/emu-MDT0000-mdtlov/target_obd"].splitlines()[3] == "3: emu-OST0003_UUID ACTIVE"
    assert mds["sys/fs/lustre/lod/emu-MDT0000-mdtlov/qos_threshold_rr"] == "17%\n"


# -- real processes ------------------------------------------------------------------------------

def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def setstripe_shown(iez_cmd: list[str], args: list[str]) -> subprocess.CompletedProcess:
    """`iez setstripe ARGS` (silent on success, as lfs setstripe), then what `iez getstripe`
    shows of its target; the failed setstripe itself when it fails."""
    r = run(iez_cmd + ["setstripe", *args])
    return run(iez_cmd + ["getstripe", args[-1]]) if r.returncode == 0 else r


@pytest.fixture
def cluster(tmp_path, iez_cmd):
    d = tmp_path / "emu"
    r = run(iez_cmd + ["emulate", "init", str(d), "--oss", "3", "--osts-per-oss", "5", "--ost-size", "1GiB"])
    assert r.returncode == 0, r.stderr
    assert "15 OSTs, 15.0GiB in all" in r.stdout  # binary units, named as such (lfs df -h's 15.0G)
    r = run(iez_cmd + ["emulate", "up", str(d)])
    assert r.returncode == 0, r.stderr
    yield d
    run(iez_cmd + ["emulate", "down", str(d)])
    assert not (d / "run" / "mds.pid").exists()


def test_init_refuses_non_empty_dir(tmp_path, iez_cmd):
    (tmp_path / "x").write_text("keep me")
    r = run(iez_cmd + ["emulate", "init", str(tmp_path)])
    assert r.returncode == 2 and "not empty" in r.stderr
    assert (tmp_path / "x").read_text() == "keep me"


def test_setstripe_getstripe_df_end_to_end(cluster, iez_cmd):
    fs = cluster / "fs"
    # explicit OST list: kept exactly, in order
    r = setstripe_shown(iez_cmd, ["-S", "1M", "-o", "7,2,11", str(fs / "listed")])
    assert r.returncode == 0, r.stderr
    r = run(iez_cmd + ["getstripe", str(fs / "listed")])
    assert r.returncode == 0, r.stderr
    assert "lmm_stripe_count:  3" in r.stdout and "lmm_stripe_size:   1048576" in r.stdout
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("\t") and ln.split()[0].isdigit()]
    assert [int(x[0]) for x in rows] == [7, 2, 11]
    # stripe offset: index order from that OST (docs/references.md#l-alloc-specific)
    r = setstripe_shown(iez_cmd, ["-c", "4", "-i", "3", str(fs / "offset")])
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("\t") and ln.split()[0].isdigit()]
    assert [int(x[0]) for x in rows] == [3, 4, 5, 6]
    # default allocation on an empty cluster is RR: 4 distinct OSTs spread over the OSSs
    r = setstripe_shown(iez_cmd, ["-c", "4", str(fs / "rr")])
    assert r.returncode == 0, r.stderr
    rows = [int(ln.split()[0]) for ln in r.stdout.splitlines() if ln.startswith("\t") and ln.split()[0].isdigit()]
    assert len(set(rows)) == 4 and len({i // 5 for i in rows}) >= 2
    # PFL: components kept (the first instantiated at create, the rest as the file grows)
    r = setstripe_shown(iez_cmd, ["-E", "4M", "-c", "1", "-E", "-1", "-c", "2", str(fs / "pfl")])
    assert r.returncode == 0, r.stderr
    r = run(iez_cmd + ["getstripe", str(fs / "pfl")])
    assert "lcm_entry_count:   2" in r.stdout and "lcme_extent.e_end:   EOF" in r.stdout
    assert "lcme_id:             1" in r.stdout and "lcme_id:             2" in r.stdout
    # write 8 MiB into "listed": each of its 3 OSTs holds its share, seen by df
    with open(fs / "listed", "r+b") as f:
        f.write(b"x" * (8 * MiB))
    r = run(iez_cmd + ["df", str(fs)])
    assert r.returncode == 0, r.stderr
    used = {int(ln.split("[OST:")[1].rstrip("]").split("]")[0]): int(ln.split()[2])
            for ln in r.stdout.splitlines() if "[OST:" in ln}
    assert used[7] == 3 * 1024 and used[2] == 3 * 1024 and used[11] == 2 * 1024
    assert used[0] == 0
    assert "filesystem_summary:" in r.stdout


def test_params_tree_follows_usage(cluster):
    fs = cluster / "fs"
    from iez.backend import backend_for

    b = backend_for(fs / "f")
    got = b.create(fs / "f", Layout(stripe_size=MiB, osts=(5,)))
    assert got.plain.osts == (5,)
    with open(fs / "f", "r+b") as f:
        f.write(b"y" * (4 * MiB))
    p = cluster / "params" / "oss1" / "sys" / "fs" / "lustre" / "obdfilter" / "iez-OST0005" / "kbytesavail"
    deadline = time.time() + 10
    want = (1 << 20) - 4096
    while time.time() < deadline and int(p.read_text()) != want:
        time.sleep(0.2)
    assert int(p.read_text()) == want
    stats = (cluster / "params/oss1/proc/fs/lustre/obdfilter/iez-OST0005/stats").read_text()
    assert "write_bytes               4 samples [bytes] 1048576 1048576 4194304" in stats
    # The parsers that read a real OSS's /proc and /sys read this tree the same way.
    from iez.lustre.params import ParamTree
    from iez.lustre.stats import parse_stats
    from iez.lustre.targets import osp_states, target_space

    oss1 = ParamTree(cluster / "params" / "oss1")
    space = target_space(oss1.get("obdfilter.*.kbytes*")).by_index("OST")
    assert sorted(space) == [5, 6, 7, 8, 9] and space[5].kbytesavail == want
    st = parse_stats(oss1.get("obdfilter.iez-OST0005.stats")["obdfilter.iez-OST0005.stats"])
    assert st.counter("write_bytes").sum == 4 * MiB and not st.skipped
    mds = ParamTree(cluster / "params" / "mds0")
    assert len(target_space(mds.get("osp.*.kbytesavail")).by_index("OST")) == 15
    assert set(osp_states(mds.get("osp.*.*")).values()) == {"active"}
    assert not oss1.errors and not mds.errors


def test_mds_line_protocol(cluster):
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(cluster / "run" / "mds.sock"))
    f = s.makefile("rw")
    for req, want in [("PING", "OK\tpong"), ("NONSENSE", "ERR\tEPROTO"),
                      (f"ALLOC\t{cluster}/fs/a\tS=1048576,o=99", "ERR\tEINVAL"),
                      (f"ALLOC\t{cluster}/fs/a\tS=1000", "ERR\tEINVAL")]:
        f.write(req + "\n")
        f.flush()
        assert f.readline().startswith(want), req
    f.write(f"ALLOC\t{cluster}/fs/a\tc=2\n")
    f.flush()
    status, spec = f.readline().rstrip("\n").split("\t")
    got = parse_layout(spec).plain
    assert status == "OK" and got.stripe_size == 1 << 20 and got.stripe_count == 2
    assert len(set(got.osts)) == 2 and got.stripe_offset == got.osts[0]
    s.close()


def test_bad_input_through_cli(cluster, iez_cmd, tmp_path):
    fs = cluster / "fs"
    r = setstripe_shown(iez_cmd, ["-o", "42", str(fs / "bad")])
    assert r.returncode == 1 and "iez: error:" in r.stderr and "42" in r.stderr
    assert not (fs / "bad").exists()
    r = setstripe_shown(iez_cmd, ["-S", "100", str(fs / "bad")])
    assert r.returncode == 2 and "64 KiB" in r.stderr
    r = setstripe_shown(iez_cmd, ["-c", "x", str(fs / "bad")])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    (fs / "plain").write_text("made without a layout")  # a missing xattr
    r = run(iez_cmd + ["getstripe", str(fs / "plain")])
    assert r.returncode == 0 and r.stdout == f"{fs / 'plain'} has no stripe info\n"  # as lfs says it
    r = setstripe_shown(iez_cmd, ["-c", "1", str(fs / "plain")])
    assert r.returncode == 1 and "File exists" in r.stderr
    assert (fs / "plain").read_text() == "made without a layout"  # never replaced
    r = run(iez_cmd + ["getstripe", str(tmp_path)])
    assert r.returncode == 1 and "neither Lustre nor an emulated" in r.stderr


def test_full_ost_is_skipped_and_all_full_is_enospc(tmp_path, iez_cmd):
    d = tmp_path / "small"
    toml = tmp_path / "c.toml"
    toml.write_text("""
fsname = "tiny"
[[oss]]
name = "oss0"
osts = [0, 1]
[ost_defaults]
size = "64MiB"
[[ost]]
index = 0
used = "64MiB"
""")
    assert run(iez_cmd + ["emulate", "init", str(d), "--cluster", str(toml)]).returncode == 0
    assert run(iez_cmd + ["emulate", "up", str(d)]).returncode == 0
    try:
        r = setstripe_shown(iez_cmd, ["-c", "1", str(d / "fs" / "a")])
        assert r.returncode == 0, r.stderr
        assert "\t     1\t" in r.stdout  # OST0000 is full: the file goes to OST0001
        r = setstripe_shown(iez_cmd, ["-o", "0", str(d / "fs" / "b")])
        assert r.returncode == 1 and ("ENOSPC" in r.stderr or "full" in r.stderr)
        assert not (d / "fs" / "b").exists()
    finally:
        run(iez_cmd + ["emulate", "down", str(d)])


def test_mds_restart_and_seeded_reproducibility(tmp_path, iez_cmd):
    """Same seed, same layouts; a restart reseeds RR as Lustre's MDS does."""
    got = []
    for k in range(2):
        d = tmp_path / f"c{k}"
        assert run(iez_cmd + ["emulate", "init", str(d)]).returncode == 0
        assert run(iez_cmd + ["emulate", "up", str(d), "--seed", "7"]).returncode == 0
        try:
            outs = [setstripe_shown(iez_cmd, ["-c", "4", str(d / "fs" / f"f{i}")]) for i in range(5)]
            assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
            got.append([o.stdout.replace(str(d), "") for o in outs])
            assert run(iez_cmd + ["emulate", "down", str(d)]).returncode == 0
            assert run(iez_cmd + ["emulate", "up", str(d)]).returncode == 0
            r = setstripe_shown(iez_cmd, ["-c", "2", str(d / "fs" / "after")])
            assert r.returncode == 0, r.stderr
        finally:
            run(iez_cmd + ["emulate", "down", str(d)])
    assert got[0] == got[1]


def test_emulated_mds_pid_and_socket_cleanup(cluster):
    pid = int((cluster / "run" / "mds.pid").read_text())
    os.kill(pid, 0)
    assert (cluster / "run" / "mds.sock").exists()


def test_concurrent_refreshes_keep_the_mds_answering(cluster):
    """Clients asking for refreshes while the MDS's own loop refreshes: no request may kill a
    transport (a REP socket that dies never answers again)."""
    import threading

    from iez.emulated.mds_client import MdsClient
    from iez.emulated.clusterdir import open_cluster_dir

    cd = open_cluster_dir(cluster)
    errors: list[Exception] = []

    def hammer() -> None:
        c = MdsClient(cd)
        try:
            for _ in range(30):
                c.refresh()
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert MdsClient(cd, 2000).ping()
    assert "Traceback" not in (cluster / "run" / "mds.log").read_text()


def test_init_on_a_file_system_without_user_xattrs_says_so(tmp_path, iez_cmd):
    """ramfs has no user xattrs: init must refuse with one clear line and leave nothing behind.
    Runs in a private mount namespace (unshare), so the mount cannot leak."""
    from conftest import need_tool

    need_tool("unshare", "apt-get install util-linux")
    mnt = tmp_path / "ramfs"
    mnt.mkdir()
    script = (f'mount -t ramfs none "{mnt}" && "{iez_cmd[0]}" emulate init "{mnt}/c"; rc=$?; '
              f'ls -A "{mnt}"; exit $rc')
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=60)
    if "mount:" in r.stderr:
        pytest.fail(f"this test needs root to mount a ramfs in a private namespace: {r.stderr.strip()}")
    assert r.returncode == 1, r.stderr
    assert "refuses user xattrs" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert r.stdout == ""  # nothing left on the ramfs


def test_directory_default_layouts(cluster, iez_cmd):
    """lfs setstripe on a directory sets the default of the files created in it: whole when the
    create asks for nothing, field by field when it sets some (count, size, pool)."""
    d = cluster / "fs" / "out"
    d.mkdir()
    sub = d / "deeper"
    sub.mkdir()
    r = setstripe_shown(iez_cmd, ["-c", "8", "-S", "2M", str(d)])
    assert r.returncode == 0, r.stderr
    assert "stripe_count:  8 stripe_size:   2097152 pattern:       raid0 stripe_offset: -1" in r.stdout
    r = run(iez_cmd + ["getstripe", str(d)])
    assert r.returncode == 0 and "stripe_count:  8 stripe_size:   2097152" in r.stdout
    # a create that asks for nothing (as a plain open(O_CREAT) does) inherits all of it, also below
    for f in (d / "a", sub / "b"):
        r = setstripe_shown(iez_cmd, [str(f)])  # no options: the directory default
        assert r.returncode == 0, r.stderr
        assert "lmm_stripe_count:  8" in r.stdout and "lmm_stripe_size:   2097152" in r.stdout
    # a create that sets the count keeps it and takes the size from the directory
    r = setstripe_shown(iez_cmd, ["-c", "2", str(d / "c")])
    assert "lmm_stripe_count:  2" in r.stdout and "lmm_stripe_size:   2097152" in r.stdout
    # outside the directory: the file system's default (1 x 1 MiB)
    r = setstripe_shown(iez_cmd, [str(cluster / "fs" / "elsewhere")])
    assert "lmm_stripe_count:  1" in r.stdout and "lmm_stripe_size:   1048576" in r.stdout
    r = setstripe_shown(iez_cmd, ["-o", "99", str(d)])
    assert r.returncode == 1 and "unknown OST index 99" in r.stderr


# -- many clients, clients that go away, oversized requests --------------------------------------

def mds_log(cluster: Path) -> str:
    return (cluster / "run" / "mds.log").read_text()


def test_500_clients_connect_at_once(cluster):
    """The listen backlog was 5: a job's ranks connecting together were refused (EAGAIN)."""
    path = str(cluster / "run" / "mds.sock")
    socks = []
    try:
        for _ in range(500):
            s = socket.socket(socket.AF_UNIX)
            s.setblocking(False)  # as libiez connects: a full backlog is an error, not a wait
            s.connect(path)
            socks.append(s)
        for s in socks:
            s.setblocking(True)
            s.settimeout(30)
            s.sendall(b"PING\n")
        for s in socks:
            assert s.recv(64) == b"OK\tpong\n"
    finally:
        for s in socks:
            s.close()


def test_clients_going_away_mid_request_or_mid_reply_leave_no_traceback(cluster):
    path = str(cluster / "run" / "mds.sock")
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(f"ALLOC\t{cluster}/fs/half".encode())  # mid-request
    s.close()
    for _ in range(5):  # mid-reply: thousands of requests, then gone before reading one answer
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.settimeout(1)
        try:
            s.sendall(f"ALLOC\t{cluster}/fs/a\tc=2\n".encode() * 3000)
        except TimeoutError:
            pass  # the MDS stopped reading: its replies fill the socket we never read
        s.close()
    time.sleep(1.5)
    from iez.emulated.mds_client import MdsClient
    from iez.emulated.clusterdir import open_cluster_dir

    assert MdsClient(open_cluster_dir(cluster), 2000).ping()
    log = mds_log(cluster)
    assert "Traceback" not in log and "BrokenPipe" not in log, log[-2000:]
    assert not (cluster / "fs" / "half").exists()


def test_an_endless_line_is_refused_at_the_cap(cluster):
    """The line socket buffered a request until its newline, however long."""
    from iez.emulated.mds import MAX_REQUEST

    s = socket.socket(socket.AF_UNIX)
    s.connect(str(cluster / "run" / "mds.sock"))
    s.settimeout(10)
    try:
        s.sendall(b"PING" + b"x" * (MAX_REQUEST + 10))  # no newline, ever
    except BrokenPipeError:
        pass  # the MDS may hang up before the last bytes are sent
    f = s.makefile("rb")
    assert f.readline() == b"ERR\tEPROTO\trequest too long\n"
    assert f.readline() == b""  # and it hung up
    s.close()
    # requests just under the cap are still read and answered; a path longer than PATH_MAX is
    # refused as open() would (walking its 30,000 parents for directory defaults took minutes)
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(cluster / "run" / "mds.sock"))
    s.settimeout(10)
    f = s.makefile("rb")
    s.sendall(f"ALLOC\t{cluster}/fs/{'d/' * ((MAX_REQUEST - 400) // 2)}f\tc=1\n".encode())
    assert f.readline().startswith(b"ERR\tENAMETOOLONG\t")
    s.sendall(f"ALLOC\t{cluster}/fs/{'d/' * 1000}f\tc=1\n".encode())
    assert f.readline().startswith(b"OK\t")
    s.close()


def test_zmq_requests_over_the_cap_are_dropped_unread(cluster):
    import zmq

    from iez.emulated.mds_client import MdsClient
    from iez.emulated.clusterdir import open_cluster_dir
    from iez.emulated.mds import MAX_REQUEST

    cd = open_cluster_dir(cluster)
    ctx = zmq.Context.instance()
    req = ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(cd.ipc)
    try:
        req.send(b'{"op": "ping", "pad": "' + b"x" * (MAX_REQUEST + 1) + b'"}')
        assert not req.poll(1500), "the MDS read a message over its size limit"
    finally:
        req.close()
    assert MdsClient(cd, 2000).ping()
    assert "Traceback" not in mds_log(cluster)


# -- fuzzing the MDS's request parser ------------------------------------------------------------


@pytest.fixture(scope="module")
def mds_core(tmp_path_factory):
    """An MdsCore over a real cluster directory: the code behind both of the MDS's sockets."""
    from iez.emulated.clusterdir import init_cluster_dir
    from iez.emulated.mds import MdsCore

    cd = init_cluster_dir(tmp_path_factory.mktemp("mds") / "emu", make_cluster(2, 3, 1 << 30))
    (cd.fs / "dir").mkdir()
    return MdsCore(cd, seed=1)


SPEC = st.text(alphabet="Scipo=,0123456789-:;|eEOFxkKmM\t ", max_size=40)
LINES = st.one_of(
    st.text(max_size=200),
    st.builds(lambda op, path, spec: f"{op}\t{path}\t{spec}", st.sampled_from(["ALLOC", "PING", "REFRESH", "alloc"]),
              st.one_of(st.just("/x/fs/dir/f"), st.text(max_size=30), st.from_regex(r"\A/[a-z/.]{0,40}\Z")), SPEC),
    st.builds(lambda path, spec: f"ALLOC\t{path}\t{spec}\n", st.from_regex(r"\A/[a-z/]{0,20}\Z"), SPEC))


@pytest.mark.fuzz
@fuzz_settings(3000)
@given(LINES)
def test_fuzz_mds_request_lines(mds_core, line):
    """Any line gets one reply line, OK or ERR with an errno name; never another exception."""
    line = line.replace("/x/fs", str(mds_core.cd.fs))
    reply = mds_core.handle_line(line)
    assert "\n" not in reply and "\r" not in reply
    assert reply.startswith("OK\t") or re.match(r"ERR\t[A-Z]+\t", reply), reply


@pytest.mark.fuzz
@fuzz_settings(1500)
@given(st.dictionaries(st.sampled_from(["op", "path", "layout", "inodes", "x"]),
                       st.one_of(st.sampled_from(["ping", "alloc", "df", "refresh", "/x/fs/f"]), st.text(max_size=20),
                                 st.integers(), st.none(), st.lists(st.integers(), max_size=3)), max_size=4))
def test_fuzz_mds_json_requests(mds_core, msg):
    reply = mds_core.handle_json(msg)
    assert isinstance(reply["ok"], bool) and (reply["ok"] or reply["errno"].isupper())


@pytest.mark.timeout(240)
def test_idle_clients_beyond_the_cap_are_told_and_hung_up_on(cluster):
    """Each line client holds a thread (libiez keeps its connection between creates): a local
    user opening idle connections without end exhausted the MDS. Past MAX_CLIENTS a client gets
    one ERR line and is hung up on; once the idle ones go, clients are served again."""
    import resource

    from iez.emulated.mds import MAX_CLIENTS

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    path = str(cluster / "run" / "mds.sock")
    idle = []
    try:
        for _ in range(MAX_CLIENTS):
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            idle.append(s)
        idle[-1].settimeout(60)
        idle[-1].sendall(b"PING\n")  # the last one in is served: all are accepted
        assert idle[-1].recv(64) == b"OK\tpong\n"
        extra = socket.socket(socket.AF_UNIX)
        extra.settimeout(60)
        extra.connect(path)
        assert extra.recv(64) == b"ERR\tEAGAIN\ttoo many clients\n"
        assert extra.recv(64) == b""  # and hung up on
        extra.close()
    finally:
        for s in idle:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    deadline = time.monotonic() + 60
    while True:  # the slots come back as the MDS sees the idle clients gone
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(60)
        s.connect(path)
        s.sendall(b"PING\n")
        got = s.recv(64)
        s.close()
        if got == b"OK\tpong\n" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got == b"OK\tpong\n"
