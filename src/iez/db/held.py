"""The bytes a run's stored placements put on each OST: the RAID-0 map of every file
(`iez.alloc.policy.job_bytes`), from the placements table's columns. Summed once, when the
placements are stored (table `placed_bytes`), so that reserving other plans' space before a
placement reads a row per OST, not a row per file."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from iez.alloc.policy import job_bytes, stripe_bytes
from iez.plan import parse_layout
from iez.request import Placement


def held_bytes(written: Sequence[int], sizes: Sequence[int], ost_lists: Sequence[str],
               layouts: Sequence[str]) -> dict[int, int]:
    """Bytes per OST of files with these stored columns (write bytes, stripe size of the first
    component, its OST list, the whole layout in the plan grammar). Plain layouts are mapped in
    bulk; a layout with components (or no stripe size) one by one."""
    plain = np.fromiter(((s > 0 and "/" not in lay) for s, lay in zip(sizes, layouts)), bool, len(layouts))
    some = np.flatnonzero(~plain).tolist()
    out = job_bytes([Placement("", parse_layout(layouts[i]), written[i]) for i in some])
    if not plain.any():
        return out
    at = np.flatnonzero(plain).tolist()
    lists = [ost_lists[i] for i in at]
    count = np.array([s.count(" ") + 1 for s in lists], dtype=np.int64)
    ost = np.fromstring(" ".join(lists), dtype=np.int64, sep=" ")  # C's parser: 6x np.array of split()
    k = np.arange(len(ost)) - np.repeat(np.cumsum(count) - count, count)  # stripe of each OST
    held = stripe_bytes(np.repeat(np.array(written, dtype=np.int64)[at], count),
                        np.repeat(np.array(sizes, dtype=np.int64)[at], count), np.repeat(count, count), k)
    used, where = np.unique(ost[held > 0], return_inverse=True)
    total = np.zeros(len(used), dtype=np.int64)
    np.add.at(total, where.reshape(-1), held[held > 0])
    for i, b in zip(used.tolist(), total.tolist()):
        out[i] = out.get(i, 0) + b
    return out
