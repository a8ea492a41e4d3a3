"""How an iez process's C heap hands memory back to the kernel (glibc's `mallopt`).

Allocation and plan writing make many short-lived arrays and strings of 0.1-50 MB. Under
glibc's defaults each one of them over the mmap threshold (128 KiB at start, raised as such
blocks are freed) is a fresh mapping, and the free space at the top of the heap is given back
once it passes the trim threshold, so the next job's arrays are fresh pages again. Allocation
end to end faulted 3,900 pages a run at 100,000 files and 28,000 at 1,000,000, and took 28 and
242 ms against 20 and 165 ms with the heap kept (docs/allocation.md, "The heap").

`keep_freed_memory` raises both thresholds once per process, so such blocks come from the heap
and stay there for the next job. The cost is memory the process keeps: up to TRIM_BYTES of free
heap, held after the largest job (the controller, which places job after job, reaches that peak
anyway). Only the `iez` command's own processes call it (`iez.cli.main`), never a process libiez
is loaded into.
"""

from __future__ import annotations

import ctypes

# mallopt's parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

# The largest mmap threshold glibc takes on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX, 32 MiB):
# a plan text of 10^6 files (46 MB) is still mapped on its own.
MMAP_BYTES = 32 << 20
TRIM_BYTES = 256 << 20  # free heap kept: above a 10^6-file job's working set (143 MiB)


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; False where the C library is
    not glibc (no `mallopt`) or refuses them, which changes nothing but speed."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the process already has
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_BYTES))
