"""The controller-host gate (iez.alloc.gate, read by iez.collect.host): allocate only while CPU < 70% and memory < 50%."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from iez.alloc.gate import GateClosed, GateLimits, HostLoad, decide
from iez.collect.host import check, read_host_load, require_open, wait_open
from iez.errors import ConfigError, IezError

MEMINFO = """MemTotal:       24684084 kB
MemFree:        23298236 kB
MemAvailable:   {avail} kB
Buffers:           20436 kB
Cached:           851352 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
"""


def fake_proc(tmp_path: Path, load: str = "0.52 0.58 0.59 1/467 12345", avail: int = 18513063,
              meminfo: str | None = None) -> Path:
    (tmp_path / "loadavg").write_text(load + "\n")
    (tmp_path / "meminfo").write_text(meminfo if meminfo is not None else MEMINFO.format(avail=avail))
    return tmp_path


def test_decide_is_strict_and_says_why():
    assert decide(HostLoad(0.69, 0.49)).open
    shut = decide(HostLoad(0.70, 0.2))
    assert not shut.open and shut.reason == "host busy: CPU 70% >= 70%"
    shut = decide(HostLoad(0.9, 0.5))
    assert not shut.open and "CPU 90% >= 70%" in shut.reason and "memory 50% >= 50%" in shut.reason
    assert decide(HostLoad(0.9, 0.6), GateLimits(max_cpu=0.95, max_mem=0.65)).open


def test_limits_must_be_positive_fractions():
    for bad in (0, -0.5, math.nan, math.inf):
        with pytest.raises(ConfigError, match="positive fraction"):
            GateLimits(max_cpu=bad)


def test_reads_load_and_memory_as_proc_writes_them(tmp_path):
    load = read_host_load(fake_proc(tmp_path), cores=2)
    assert load.cpu == pytest.approx(0.26)
    assert load.mem == pytest.approx(1 - 18513063 / 24684084)
    assert check(GateLimits(), tmp_path, cores=2).open  # 26% CPU, 25% memory


def test_older_kernels_without_memavailable_use_memfree(tmp_path):
    meminfo = "MemTotal:  1000 kB\nMemFree:  400 kB\n"
    assert read_host_load(fake_proc(tmp_path, meminfo=meminfo), cores=1).mem == pytest.approx(0.6)


def test_a_busy_host_shuts_the_gate(tmp_path):
    proc = fake_proc(tmp_path, load="3.10 2.00 1.00 5/300 999", avail=2_000_000)
    with pytest.raises(GateClosed, match="not allocating now, host busy: CPU 155% >= 70%, memory 92% >= 50%"):
        require_open(GateLimits(), proc, cores=2)
    assert require_open(GateLimits(max_cpu=2.0, max_mem=0.95), proc, cores=2).open


@pytest.mark.parametrize("load, meminfo, msg", [
    ("", None, "cannot read the load average"),
    ("high 1 2", None, "cannot read the load average"),
    ("0.1 0.1 0.1 1/1 1", "garbage\n", "no MemTotal"),
    ("0.1 0.1 0.1 1/1 1", "MemTotal: 0 kB\nMemFree: 0 kB\n", "no MemTotal"),
])
def test_malformed_proc_files_give_one_line_errors(tmp_path, load, meminfo, msg):
    with pytest.raises(IezError, match=msg) as e:
        read_host_load(fake_proc(tmp_path, load=load, meminfo=meminfo), cores=2)
    assert "\n" not in str(e.value)


def test_missing_proc_files(tmp_path):
    with pytest.raises(IezError, match="cannot read .*loadavg"):
        read_host_load(tmp_path)


def test_this_hosts_proc():
    load = read_host_load()
    assert load.cpu >= 0 and 0 <= load.mem <= 1
    assert isinstance(check().open, bool)


def test_wait_open_waits_for_the_host_to_calm_down(tmp_path, monkeypatch):
    import iez.collect.host as host

    proc = fake_proc(tmp_path, load="900.0 900.0 900.0 1/467 12345")
    seen = []

    def calm_after_first_look(_seconds: float) -> None:
        fake_proc(tmp_path)  # the load drops while we sleep

    monkeypatch.setattr(host.time, "sleep", calm_after_first_look)
    d = wait_open(GateLimits(max_cpu=1.0), timeout=60, on_wait=seen.append, proc=proc)
    assert d.open and len(seen) == 1 and "CPU" in seen[0].reason and not seen[0].open


def test_wait_open_gives_up_after_its_timeout(tmp_path):
    proc = fake_proc(tmp_path, load="900.0 900.0 900.0 1/467 12345")
    with pytest.raises(GateClosed, match="not allocating now, host busy: CPU"):
        wait_open(GateLimits(max_cpu=1.0), timeout=0, proc=proc)  # no wait: one look, shut
