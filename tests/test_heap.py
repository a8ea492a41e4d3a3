"""iez.heap: an iez process keeps freed blocks for its next job instead of faulting them in again."""

from __future__ import annotations

import subprocess
import sys

import pytest

import iez.cli

# A fresh process makes and frees six 8 MiB numpy arrays a round (a job's columns at 10^6 files)
# and prints the minor page faults of the last 20 rounds; argv[1] says whether it keeps freed
# memory. Under glibc's defaults the first free raises the mmap threshold to 8 MiB and the trim
# threshold to 16 MiB, so the 48 MiB freed at the heap's top go back to the kernel every round.
ROUNDS = """
import resource, sys
import numpy as np
from iez.heap import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def job():
    return sum(float(a.sum()) for a in [np.ones(1 << 20) for _ in range(6)])
for _ in range(5):
    job()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    job()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_a_freed_array_is_reused_without_page_faults_once_the_heap_keeps_freed_memory():
    # Given back, 48 MiB are faulted in again each round (12,288 pages; fewer on huge pages);
    # kept, the rounds reuse the same pages.
    assert faults("defaults") >= 20 * 20
    assert faults("keep") < 20


def test_every_iez_command_keeps_freed_memory(monkeypatch):
    called = []
    monkeypatch.setattr(iez.cli, "keep_freed_memory", lambda: called.append(1) or True)
    with pytest.raises(SystemExit):
        iez.cli.main(["--version"])
    assert called == [1]
